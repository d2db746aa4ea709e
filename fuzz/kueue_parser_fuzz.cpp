// libFuzzer target for the Kueue queue-object parser (common/kueue/): any bytes must give objects
// or an error Status, never a crash, a hang or an uncaught exception. What is stored (each
// object's re-emitted YAML) must parse again to the same object, as the coordinator reloads it
// after a restart.

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "common/kueue/kueue_model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto parsed = trainlet::kueue::ParseQueueDocuments(text);
  if (!parsed.ok()) return 0;
  for (const auto& o : parsed->objects) {
    auto again = trainlet::kueue::ParseQueueDocuments(o.yaml);
    if (!again.ok() || again->objects.size() != 1) __builtin_trap();
    const auto& a = again->objects[0];
    if (a.kind != o.kind || a.name != o.name || a.namespace_ != o.namespace_ || a.yaml != o.yaml) {
      __builtin_trap();
    }
    if (o.cluster_queue && o.cluster_queue->namespace_selector) {
      (void)o.cluster_queue->namespace_selector->Matches({{"team", "a"}});
    }
  }
  return 0;
}
