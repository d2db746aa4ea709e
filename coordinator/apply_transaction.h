// ApplyTransaction: one `apply` of a file, from its text to what is stored, before memory changes.
//
// Prepare parses the file, stages its runtimes (visible to its own jobs), and sorts its TrainJobs
// against the jobs already held: a new one becomes a JobEntry (job_entry.h), one held already is
// unchanged or flips spec.suspend (lifecycle_rules.h), anything else about it is refused. A
// TrainJob applied again is first laid over the stored document, as kubectl applies, so fields it
// leaves out are no change. A Training Operator job (PyTorchJob, ..., MPIJob) comes converted
// (common/trainjob/v1_conversion.h) with a runtime of its own, and its JobStatus keeps the kind.
// Kueue's queue objects of the file (ClusterQueues, LocalQueues, ...; queue_catalog.h) are staged
// against the QueueCatalog and stored with the rest. Store writes all of it in one store
// transaction. Nothing here changes JobController's memory: it
// commits the parts once Store succeeded (flips, runtimes, new jobs), so a refused file leaves
// everything as it was.
//
// Errors: Invalid names the file (a parse error) or the TrainJob; kIo from Store says nothing of
// the file was stored. Owned by the loop for the length of one Apply.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "coordinator/job_entry.h"
#include "coordinator/job_store.h"
#include "coordinator/lifecycle_rules.h"
#include "coordinator/queue_catalog.h"
#include "coordinator/runtime_catalog.h"
#include "trainlet/v1/envelope.pb.h"

namespace trainlet::coordinator {

struct ApplyTransaction {
  // The job of that name already held, or null.
  using HeldJob = std::function<const JobEntry*(const std::string& name)>;

  // Parses `yaml` as apply does: a TrainJob of a held name is laid over its stored document, as
  // kubectl applies (what it leaves out is no change), and what apply_limits.h refuses is
  // refused. Errors name `source`.
  static Result<trainjob::ParsedFile> Parse(const std::string& yaml, const std::string& source,
                                            const HeldJob& held);
  // Whether `parsed` names a TrainJob (or a converted Training Operator job) already held.
  static bool NamesHeldJob(const trainjob::ParsedFile& parsed, const HeldJob& held);
  // Parse, then as below.
  static Result<ApplyTransaction> Prepare(const std::string& yaml, const std::string& source,
                                          int64_t now_ms, const RuntimeCatalog& runtimes,
                                          const HeldJob& held, const JobEntryOptions& options,
                                          const QueueCatalog* queues = nullptr);
  // A file already parsed and checked (ApplyParser, on its own thread). The file's Kueue
  // documents are parsed here and staged against `queues` (null: an empty catalog); one that is
  // invalid refuses the whole file.
  static Result<ApplyTransaction> Prepare(trainjob::ParsedFile parsed, const std::string& source,
                                          int64_t now_ms, const RuntimeCatalog& runtimes,
                                          const HeldJob& held, const JobEntryOptions& options,
                                          const QueueCatalog* queues = nullptr);
  // All or nothing. With min_free_bytes > 0 and anything to write, refuses first when the state
  // dir's file system has less free. With `defer_sync`, committed as JobStore's
  // TransactionDeferringSync: the caller makes it durable (a later Transaction, or Sync) before
  // anyone outside hears of it.
  Status Store(JobStore& store, uint64_t min_free_bytes, bool defer_sync = false) const;

  std::string source;            // the file's name, "" for stdin
  RuntimeCatalog::Stage staged;  // the file's runtimes
  QueueCatalog::Stage queues;    // the file's Kueue objects
  std::vector<std::unique_ptr<JobEntry>> new_jobs;
  std::vector<SuspendFlip> flips;  // held jobs whose spec.suspend this file changes
  std::vector<std::string> warnings;
  v1::ApplyResult result;  // so far: the unchanged jobs
};

}  // namespace trainlet::coordinator
