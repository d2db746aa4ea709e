// libFuzzer target for the TrainJob YAML parser: any bytes must give a model or an error Status,
// never a crash, a hang or an uncaught exception. The parser itself turns yaml-cpp exceptions
// into Status values, so nothing is caught here.

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "common/trainjob/trainjob_model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto parsed = trainlet::trainjob::ParseDocuments(text);
  if (parsed.ok()) {
    // Stored YAML must load again, and resolving any job against any runtime must not crash.
    for (const auto& job : parsed->jobs) {
      auto again = trainlet::trainjob::ParseDocuments(job.yaml);
      if (!again.ok() || again->jobs.size() != 1) __builtin_trap();
      for (const auto& rt : parsed->runtimes) (void)trainlet::trainjob::Resolve(job, rt);
    }
    for (const auto& rt : parsed->runtimes) {
      auto again = trainlet::trainjob::ParseDocuments(rt.yaml);
      if (!again.ok() || again->runtimes.size() != 1) __builtin_trap();
    }
  }
  return 0;
}
