// libFuzzer target for the TrainJob YAML parser: any bytes must give a model or an error Status,
// never a crash, a hang or an uncaught exception. The parser itself turns yaml-cpp exceptions
// into Status values, so nothing is caught here.

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "common/trainjob/trainjob_model.h"
#include "common/trainjob/v1_job.h"

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
    // A converted Training Operator job: its TrainJob and runtime load again, resolve, and carry
    // a contract the plugins can read.
    for (const auto& c : parsed->converted) {
      auto job = trainlet::trainjob::ParseDocuments(c.job.yaml);
      auto rt = trainlet::trainjob::ParseDocuments(c.runtime.yaml);
      if (!job.ok() || job->jobs.size() != 1 || !rt.ok() || rt->runtimes.size() != 1) {
        __builtin_trap();
      }
      if (!trainlet::trainjob::Resolve(job->jobs[0], rt->runtimes[0]).ok()) __builtin_trap();
      auto contract = trainlet::trainjob::V1ContractOf(c.job.annotations);
      if (!contract.ok() || !contract->has_value()) __builtin_trap();
    }
    // Applied again over itself (ParseDocuments' stored document): a model or an error, no crash.
    const trainlet::trainjob::StoredDocument stored =
        [&](std::string_view, const std::string&,
            const std::string& name) -> std::optional<std::string> {
      for (const auto& job : parsed->jobs) {
        if (job.name == name) return job.yaml;
      }
      return std::nullopt;
    };
    (void)trainlet::trainjob::ParseDocuments(text, stored);
  }
  return 0;
}
