#include "coordinator/apply_transaction.h"

#include "coordinator/apply_limits.h"

namespace trainlet::coordinator {

Result<ApplyTransaction> ApplyTransaction::Prepare(const std::string& yaml,
                                                   const std::string& source, int64_t now_ms,
                                                   const RuntimeCatalog& runtimes,
                                                   const HeldJob& held,
                                                   const JobEntryOptions& options) {
  auto parsed = trainjob::ParseDocuments(yaml);
  if (!parsed.ok()) {
    return InvalidError((source.empty() ? "" : source + ": ") + parsed.status().message());
  }
  TRAINLET_RETURN_IF_ERROR(CheckApplySizes(*parsed, source));
  return Prepare(std::move(parsed).value(), source, now_ms, runtimes, held, options);
}

Result<ApplyTransaction> ApplyTransaction::Prepare(trainjob::ParsedFile parsed,
                                                   const std::string& source, int64_t now_ms,
                                                   const RuntimeCatalog& runtimes,
                                                   const HeldJob& held,
                                                   const JobEntryOptions& options) {
  ApplyTransaction tx;
  tx.source = source;
  tx.warnings = std::move(parsed.warnings);
  // Runtimes of this file are visible to its jobs, and stored with them.
  tx.staged = RuntimeCatalog::StageRuntimes(parsed.runtimes);
  for (const auto& spec : parsed.jobs) {
    if (const JobEntry* existing = held(spec.name); existing != nullptr) {
      TRAINLET_ASSIGN_OR_RETURN(
          auto flip,
          CompareWithStored(existing->record, existing->spec.suspend, spec, source, now_ms));
      if (flip) {
        tx.flips.push_back(std::move(*flip));
      } else {
        tx.result.add_unchanged("trainjob/" + spec.name);
      }
      continue;
    }
    TRAINLET_ASSIGN_OR_RETURN(const trainjob::TrainingRuntime* rt,
                              runtimes.Resolve(tx.staged, spec.name, spec.runtime_ref));
    TRAINLET_ASSIGN_OR_RETURN(auto job,
                              NewJobEntry(spec, *rt, options, source, now_ms, tx.warnings));
    tx.new_jobs.push_back(std::move(job));
  }
  return tx;
}

Status ApplyTransaction::Store(JobStore& store, uint64_t min_free_bytes) const {
  if (min_free_bytes > 0 && (!staged.empty() || !new_jobs.empty() || !flips.empty())) {
    TRAINLET_RETURN_IF_ERROR(store.CheckSpace(min_free_bytes));
  }
  Status s = store.Transaction([&]() -> Status {
    TRAINLET_RETURN_IF_ERROR(RuntimeCatalog::Store(staged, store));
    for (const auto& job : new_jobs) TRAINLET_RETURN_IF_ERROR(store.CreateJob(job->record));
    for (const auto& flip : flips) TRAINLET_RETURN_IF_ERROR(StoreSuspend(store, flip));
    return Status::Ok();
  });
  if (s.ok() || s.code() != ErrorCode::kIo) return s;
  return IoError("state dir " + store.state_dir() + ": nothing of " +
                 (source.empty() ? std::string("stdin") : source) + " was stored: " + s.message());
}

}  // namespace trainlet::coordinator
