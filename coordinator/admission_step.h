// AdmissionStep: the queues' step of JobController's scheduling pass (issue 14).
//
// Before placement, Run gives JobAdmitter's pass the jobs and carries out what it decided: it
// writes each admission into the job's status (stored with the placement that follows, before
// any rank starts), resumes a preempted job that is admitted again, preempts through the
// owner's stop path, and notes why every other queued job waits. It lets go of the quota of jobs
// that no longer hold it, and stores fair sharing's usage history now and then. MayPlace then
// tells the placement loop which jobs may go: with queues on, only admitted ones whose admission
// checks are all Ready (AdmitCheck, `trainletctl admit-check`). The rules are the engine's
// (queue_admission.h) and JobAdmitter's; this type only applies them to the job map.
//
// A pass runs when a job or queue object changed since the last one (the owner's generation),
// else at most once a second (to refresh the waits' numbers and the history).
//
// Owned by JobController, on the coordinator's loop; no locks. It owns the admitter and the
// counters of the passes; the jobs are the owner's: it changes them through the pointers the
// owner hands it and reports each change through Owner::MarkDirty. `catalog` and `store` outlive
// it.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "coordinator/job_admitter.h"
#include "coordinator/job_entry.h"
#include "coordinator/job_store.h"
#include "coordinator/queue_catalog.h"
#include "trainlet/v1/operator.pb.h"

namespace trainlet::coordinator {

// What the admission passes did since the last TakeStats (the queue metrics).
struct AdmissionStats {
  std::map<std::string, uint64_t> preemptions;  // by the victim's ClusterQueue
  // By ClusterQueue: each admission's time in the queue.
  std::map<std::string, std::vector<double>> wait_seconds;
};

class AdmissionStep {
 public:
  // What the step needs of the job map it does not own (JobController).
  class Owner {
   public:
    // The job of that key; null when there is none.
    virtual JobEntry* FindJob(const std::string& key) = 0;
    // The job changed in memory: write it with the next flush, and bump the generation.
    virtual void MarkDirty(JobEntry& job) = 0;
    // Bumped on every change of any job.
    virtual uint64_t generation() const = 0;
    // Flips a preempted job's spec.suspend back to false (Kueue's admission), naming `by`.
    virtual Result<v1::SuspendJobResult> ResumeAdmitted(const std::string& key,
                                                        const std::string& by, int64_t now_ms) = 0;
    // Suspends and requeues the job, warning its ranks (JobController::Preempt).
    virtual Result<v1::SuspendJobResult> Preempt(const std::string& key, const std::string& by_text,
                                                 int64_t now_ms) = 0;

   protected:
    ~Owner() = default;
  };

  AdmissionStep(const QueueCatalog* catalog, JobStore* store, Owner* owner,
                JobAdmitterOptions options)
      : catalog_(catalog), store_(store), owner_(owner), admitter_(catalog, std::move(options)) {}

  // The step of one scheduling pass over `jobs` (creation order), before placement.
  void Run(const std::vector<JobEntry*>& jobs, int64_t now_ms);
  // Whether the placement loop may place this job: queues are off (as of the last Run), or it is
  // admitted and no admission check of its admission waits.
  bool MayPlace(const v1::JobStatus& status) const {
    return !active_ || (status.has_admission() && admitter_.PendingChecks(status).empty());
  }
  // JobController::AdmitCheck's work (its contract is there), without the scheduling after it.
  Result<v1::Kueue14AdmitCheckResult> AdmitCheck(const std::string& key, const std::string& check,
                                                 int64_t now_ms, const std::string& by);

  const JobAdmitter& admitter() const { return admitter_; }
  JobAdmitter& admitter() { return admitter_; }  // Load restores the fair-sharing history
  AdmissionStats TakeStats() { return std::exchange(stats_, {}); }

 private:
  // Of jobs that no longer hold it at `now_ms`.
  void ReleaseQuota(const std::vector<JobEntry*>& jobs, int64_t now_ms);
  // Stores fair sharing's usage history, at most every kFairShareHistoryWriteMs.
  void StoreFairShareHistory(int64_t now_ms);
  void AdmitJob(const std::string& key, const admission::Admission& a, int64_t now_ms);
  void PreemptForQueue(const admission::Preemption& p, int64_t now_ms);
  // `kind` is JobStatus.queue_wait.kind: WaitKindName(w.kind), or NoPriorityClass.
  void NoteWait(JobEntry& job, const admission::PendingWorkload& w, const std::string& kind,
                int64_t now_ms);

  // Constant after construction.
  const QueueCatalog* catalog_;
  JobStore* store_;
  Owner* owner_;
  // Owned by the loop.
  JobAdmitter admitter_;
  bool active_ = false;                   // queues exist: only admitted jobs are placed
  uint64_t catalog_generation_ = 0;       // the catalog's generation at the last Run
  uint64_t admitted_generation_ = ~0ull;  // the owner's generation at the last pass
  int64_t last_admission_ms_ = 0;
  int64_t history_written_ms_ = 0;  // when fair sharing's history was last stored
  AdmissionStats stats_;
};

}  // namespace trainlet::coordinator
