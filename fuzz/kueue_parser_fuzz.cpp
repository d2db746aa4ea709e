// libFuzzer target for the Kueue queue-object parser (common/kueue/): any bytes must give objects
// or an error Status, never a crash, a hang or an uncaught exception. What is stored (each
// object's re-emitted YAML) must parse again to the same model, as the coordinator reloads it
// after a restart.

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "common/kueue/kueue_model.h"

namespace {

using trainlet::kueue::QueueObject;

// What admission reads of an object: equal after the stored document is parsed again.
bool SameModel(const QueueObject& a, const QueueObject& b) {
  if (a.kind != b.kind || a.name != b.name || a.namespace_ != b.namespace_) return false;
  if (a.priority_class.has_value() != b.priority_class.has_value() ||
      a.cluster_queue.has_value() != b.cluster_queue.has_value() ||
      a.local_queue.has_value() != b.local_queue.has_value() ||
      a.flavor.has_value() != b.flavor.has_value()) {
    return false;
  }
  if (a.priority_class && a.priority_class->value != b.priority_class->value) return false;
  if (a.local_queue && a.local_queue->cluster_queue != b.local_queue->cluster_queue) return false;
  if (a.flavor && a.flavor->node_labels != b.flavor->node_labels) return false;
  if (a.cluster_queue) {
    const auto& x = *a.cluster_queue;
    const auto& y = *b.cluster_queue;
    if (x.cohort != y.cohort || x.queueing_strategy != y.queueing_strategy ||
        x.fair_sharing_weight_milli != y.fair_sharing_weight_milli ||
        x.resource_groups.size() != y.resource_groups.size() ||
        x.namespace_selector.has_value() != y.namespace_selector.has_value()) {
      return false;
    }
    for (size_t g = 0; g < x.resource_groups.size(); ++g) {
      const auto& fx = x.resource_groups[g].flavors;
      const auto& fy = y.resource_groups[g].flavors;
      if (x.resource_groups[g].covered_resources != y.resource_groups[g].covered_resources ||
          fx.size() != fy.size()) {
        return false;
      }
      for (size_t f = 0; f < fx.size(); ++f) {
        if (fx[f].name != fy[f].name || fx[f].resources.size() != fy[f].resources.size()) {
          return false;
        }
        for (size_t r = 0; r < fx[f].resources.size(); ++r) {
          if (fx[f].resources[r].nominal != fy[f].resources[r].nominal ||
              fx[f].resources[r].borrowing_limit != fy[f].resources[r].borrowing_limit ||
              fx[f].resources[r].lending_limit != fy[f].resources[r].lending_limit) {
            return false;
          }
        }
      }
    }
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto parsed = trainlet::kueue::ParseQueueDocuments(text);
  if (!parsed.ok()) return 0;
  for (const auto& o : parsed->objects) {
    // The stored document parses again to the same model (the coordinator reloads it after a
    // restart). Its text may settle one round later: the emitter does not keep every byte of
    // fields trainlet ignores (a trailing carriage return in a plain scalar, say).
    auto again = trainlet::kueue::ParseQueueDocuments(o.yaml);
    if (!again.ok() || again->objects.size() != 1) __builtin_trap();
    if (!SameModel(o, again->objects[0])) __builtin_trap();
    auto third = trainlet::kueue::ParseQueueDocuments(again->objects[0].yaml);
    if (!third.ok() || third->objects.size() != 1) __builtin_trap();
    if (third->objects[0].yaml != again->objects[0].yaml) __builtin_trap();
    if (o.cluster_queue && o.cluster_queue->namespace_selector) {
      (void)o.cluster_queue->namespace_selector->Matches({{"team", "a"}});
    }
  }
  return 0;
}
