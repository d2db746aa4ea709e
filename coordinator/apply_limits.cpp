#include "coordinator/apply_limits.h"

#include <string>

namespace trainlet::coordinator {
namespace {

Status TooLarge(const trainjob::TrainJob& job, const std::string& field, size_t bytes, size_t cap,
                const std::string& what) {
  return InvalidError("TrainJob/" + job.name + ": " + field + ": " + std::to_string(bytes) +
                      " bytes" + what + ", more than the " + std::to_string(cap) +
                      " a TrainJob may carry (docs/operations.md, \"How large an apply may be\")");
}

}  // namespace

Status CheckTrainJobSizes(const trainjob::TrainJob& job) {
  const auto& t = job.trainer;
  size_t argv = 0;
  for (const auto* list : {&t.command, &t.args}) {
    const std::string field = list == &t.command ? "spec.trainer.command" : "spec.trainer.args";
    for (size_t i = 0; i < list->size(); ++i) {
      const size_t n = (*list)[i].size();
      if (n > kMaxTrainerStringBytes) {
        return TooLarge(job, field + "[" + std::to_string(i) + "]", n, kMaxTrainerStringBytes, "");
      }
      argv += n + 1;
    }
    if (argv > kMaxTrainerArgvBytes) {
      return TooLarge(job, field, argv, kMaxTrainerArgvBytes,
                      list == &t.args ? " with spec.trainer.command" : "");
    }
  }
  size_t env = 0;
  for (size_t i = 0; i < t.env.size(); ++i) {
    const size_t n = t.env[i].value.size();
    if (n > kMaxTrainerStringBytes) {
      return TooLarge(job,
                      "spec.trainer.env[" + std::to_string(i) + "].value (" + t.env[i].name + ")",
                      n, kMaxTrainerStringBytes, "");
    }
    env += t.env[i].name.size() + n + 2;
  }
  if (env > kMaxTrainerEnvBytes) {
    return TooLarge(job, "spec.trainer.env", env, kMaxTrainerEnvBytes, "");
  }
  size_t meta = 0;
  for (const auto* m : {&job.labels, &job.annotations}) {
    for (const auto& [k, v] : *m) meta += k.size() + v.size();
  }
  if (meta > kMaxMetadataBytes) {
    return TooLarge(job, "metadata.labels and metadata.annotations", meta, kMaxMetadataBytes, "");
  }
  return Status::Ok();
}

Status CheckApplySizes(const trainjob::ParsedFile& file, const std::string& source) {
  const size_t docs = file.jobs.size() + file.runtimes.size();
  if (docs > kMaxApplyDocuments) {
    return InvalidError((source.empty() ? std::string("stdin") : source) + ": " +
                        std::to_string(docs) + " documents, more than the " +
                        std::to_string(kMaxApplyDocuments) +
                        " one apply may carry: split it into several files");
  }
  for (const auto& job : file.jobs) TRAINLET_RETURN_IF_ERROR(CheckTrainJobSizes(job));
  return Status::Ok();
}

}  // namespace trainlet::coordinator
