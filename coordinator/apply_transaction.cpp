#include "coordinator/apply_transaction.h"

#include "coordinator/apply_limits.h"
#include "coordinator/job_key.h"
#include "coordinator/replicated_job_users.h"

namespace trainlet::coordinator {

namespace {

// Apply's answer for a TrainJob whose name is taken: unchanged, or a suspend flip.
Status CompareHeld(const JobEntry& existing, const trainjob::TrainJob& spec,
                   const std::string& source, int64_t now_ms, ApplyTransaction& tx) {
  TRAINLET_ASSIGN_OR_RETURN(
      auto flip, CompareWithStored(existing.record, existing.spec.suspend, spec, source, now_ms));
  if (flip) {
    tx.flips.push_back(std::move(*flip));
  } else {
    tx.result.add_unchanged("trainjob/" + JobDisplayName(JobKey(spec.namespace_, spec.name)));
  }
  return Status::Ok();
}

}  // namespace

Result<trainjob::ParsedFile> ApplyTransaction::Parse(const std::string& yaml,
                                                     const std::string& source,
                                                     const HeldJob& held) {
  // A TrainJob applied again is laid over the stored one, as kubectl applies: what it leaves out
  // is no change (trainjob_model.h, ParseDocuments).
  const trainjob::StoredDocument stored =
      [&](std::string_view kind, const std::string& ns,
          const std::string& name) -> std::optional<std::string> {
    const JobEntry* existing = kind == "TrainJob" ? held(JobKey(ns, name)) : nullptr;
    if (existing == nullptr) return std::nullopt;
    return existing->record.spec_yaml;
  };
  auto parsed = trainjob::ParseDocuments(yaml, stored);
  if (!parsed.ok()) {
    return InvalidError((source.empty() ? "" : source + ": ") + parsed.status().message());
  }
  TRAINLET_RETURN_IF_ERROR(CheckApplySizes(*parsed, source));
  return parsed;
}

bool ApplyTransaction::NamesHeldJob(const trainjob::ParsedFile& parsed, const HeldJob& held) {
  for (const auto& spec : parsed.jobs) {
    if (held(JobKey(spec.namespace_, spec.name)) != nullptr) return true;
  }
  for (const auto& converted : parsed.converted) {
    if (held(JobKey(converted.job.namespace_, converted.job.name)) != nullptr) return true;
  }
  return false;
}

Result<ApplyTransaction> ApplyTransaction::Prepare(const std::string& yaml,
                                                   const std::string& source, int64_t now_ms,
                                                   const RuntimeCatalog& runtimes,
                                                   const HeldJob& held,
                                                   const JobEntryOptions& options,
                                                   const QueueCatalog* queues) {
  TRAINLET_ASSIGN_OR_RETURN(trainjob::ParsedFile parsed, Parse(yaml, source, held));
  return Prepare(std::move(parsed), source, now_ms, runtimes, held, options, queues);
}

Result<ApplyTransaction> ApplyTransaction::Prepare(trainjob::ParsedFile parsed,
                                                   const std::string& source, int64_t now_ms,
                                                   const RuntimeCatalog& runtimes,
                                                   const HeldJob& held,
                                                   const JobEntryOptions& options,
                                                   const QueueCatalog* queues) {
  ApplyTransaction tx;
  tx.source = source;
  tx.warnings = std::move(parsed.warnings);
  // Kueue's objects first: a file whose queue objects are invalid is refused before its jobs are
  // looked at.
  static const QueueCatalog kNoQueues;
  TRAINLET_ASSIGN_OR_RETURN(tx.queues,
                            (queues != nullptr ? *queues : kNoQueues)
                                .StageObjects(parsed.queue_documents, source, &tx.warnings));
  // Runtimes of this file are visible to its jobs, and stored with them.
  tx.staged = RuntimeCatalog::StageRuntimes(parsed.runtimes);
  // A runtime none of whose TrainJobs can run (replicated_job_users.h) is stored, as Kubeflow
  // stores it, but its author hears why now rather than from the first job refused on it.
  for (const auto& rt : parsed.runtimes) {
    if (std::string why = ReplicatedJobUsersConflict(rt); !why.empty()) {
      tx.warnings.push_back(why + " (every TrainJob on this runtime is refused at apply)");
    }
  }
  for (const auto& spec : parsed.jobs) {
    if (const JobEntry* existing = held(JobKey(spec.namespace_, spec.name)); existing != nullptr) {
      TRAINLET_RETURN_IF_ERROR(CompareHeld(*existing, spec, source, now_ms, tx));
      continue;
    }
    TRAINLET_ASSIGN_OR_RETURN(
        const trainjob::TrainingRuntime* rt,
        runtimes.Resolve(tx.staged, spec.namespace_, spec.name, spec.runtime_ref));
    TRAINLET_ASSIGN_OR_RETURN(auto job,
                              NewJobEntry(spec, *rt, options, source, now_ms, tx.warnings));
    tx.new_jobs.push_back(std::move(job));
  }
  // Training Operator jobs, each with the runtime made for it (not a catalog runtime: it is
  // stored with the job). The job keeps the kind it was applied as, and its notes.
  for (const auto& converted : parsed.converted) {
    const trainjob::TrainJob& spec = converted.job;
    if (const JobEntry* existing = held(JobKey(spec.namespace_, spec.name)); existing != nullptr) {
      TRAINLET_RETURN_IF_ERROR(CompareHeld(*existing, spec, source, now_ms, tx));
      continue;
    }
    TRAINLET_ASSIGN_OR_RETURN(
        auto job, NewJobEntry(spec, converted.runtime, options, source, now_ms, tx.warnings));
    v1::JobStatus& st = job->record.status;
    st.set_source_kind(converted.kind);
    st.set_source_api_version(converted.api_version);
    const std::string label = converted.kind + "/" + spec.name + ":";
    for (const auto& w : tx.warnings) {
      if (w.rfind(label, 0) == 0) st.add_notes(w);
    }
    tx.new_jobs.push_back(std::move(job));
  }
  return tx;
}

Status ApplyTransaction::Store(JobStore& store, uint64_t min_free_bytes, bool defer_sync) const {
  if (min_free_bytes > 0 &&
      (!staged.empty() || !new_jobs.empty() || !flips.empty() || queues.writes())) {
    TRAINLET_RETURN_IF_ERROR(store.CheckSpace(min_free_bytes));
  }
  const auto body = [&]() -> Status {
    TRAINLET_RETURN_IF_ERROR(RuntimeCatalog::Store(staged, store));
    TRAINLET_RETURN_IF_ERROR(QueueCatalog::Store(queues, store));
    for (const auto& job : new_jobs) TRAINLET_RETURN_IF_ERROR(store.CreateJob(job->record));
    for (const auto& flip : flips) TRAINLET_RETURN_IF_ERROR(StoreSuspend(store, flip));
    return Status::Ok();
  };
  Status s = defer_sync ? store.TransactionDeferringSync(body) : store.Transaction(body);
  if (s.ok() || s.code() != ErrorCode::kIo) return s;
  return IoError(store.location() + ": nothing of " +
                 (source.empty() ? std::string("stdin") : source) + " was stored: " + s.message());
}

}  // namespace trainlet::coordinator
