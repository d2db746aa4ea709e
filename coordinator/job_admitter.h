// JobAdmitter: Kueue's queues in front of placement (issue 14).
//
// Each admission pass turns the queue objects (QueueCatalog) and the jobs into the admission
// engine's inputs (queue_admission.h), runs it, and answers what the controller must do: which
// jobs to admit (with their flavors), which admitted jobs to preempt and for whom, and why every
// other queued job waits. JobController carries the answer out: it writes the admission into
// the job's status (stored before any rank starts, since placing stores the job first), resumes
// a preempted job when it is admitted again, preempts through its stop path, and places only
// admitted jobs.
//
// Which jobs are workloads, and whether they hold quota:
//  - a job with `JobStatus.admission` set holds that quota until the controller clears it: when
//    the job has ended, is suspended, is being deleted or was preempted, and every rank of it has
//    stopped (HoldsQuota), and no rank of it may still run on a node that went silent (a Lost
//    rank of a hung node may run on until the job's JobStatus.lost_node_hold_unix_ms);
//  - a job without one is pending in its queue when it is Pending, or Suspended because it was
//    preempted (reason Preempted); a job a user suspended waits for its user, not for quota;
//  - with no ClusterQueue and no LocalQueue at all, queues are off (active() is false): the
//    controller places every job as before, and nothing of this type runs.
// A job whose kueue.x-k8s.io/priority-class names no WorkloadPriorityClass waits with kind
// NoPriorityClass (Kueue refuses such a workload; here the class may still be applied).
//
// Admission checks (ClusterQueue spec.admissionChecks / admissionChecksStrategy): Kueue reserves
// the quota first, then admits once every check's controller set it Ready. trainlet has no such
// controllers: an admin is one, with `trainletctl admit-check` (JobStatus.admission_checks_ready).
// A job whose admission lacks one of its checks holds its quota and is not placed (PendingChecks).
//
// The decayed usage history (fair sharing's "who used less recently goes first") is kept here;
// JobController stores it (fair_share_history.h) and gives it back after a restart.
//
// Owned by JobController, on the coordinator's loop; no locks. `catalog` outlives it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "coordinator/admission_types.h"
#include "coordinator/admission_usage.h"
#include "coordinator/job_entry.h"
#include "coordinator/queue_catalog.h"

namespace trainlet::coordinator {

struct JobAdmitterOptions {
  // Where jobs with no kueue.x-k8s.io/queue-name label wait: LocalQueue <namespace>/<this>.
  // Empty: such jobs are admitted at once, without quota (coordinator config default_queue).
  std::string default_local_queue;
  bool fair_sharing = true;
  int64_t usage_half_life_ms = 600'000;  // fair sharing's memory of past usage
};

// What one pass decided, in the controller's terms.
struct AdmissionDecisions {
  admission::AdmissionResult result;
  // Pending jobs the engine was not given because their priority class is missing (wait kind
  // NoPriorityClass), with the message.
  std::vector<admission::PendingWorkload> unresolved;
  // Where each waiting job is in the `jobs` given to Pass, so the caller reaches it without a
  // lookup by name: by workload index (PendingWorkload::workload), and parallel to `unresolved`.
  std::vector<size_t> job_of_workload;
  std::vector<size_t> unresolved_jobs;
};

class JobAdmitter {
 public:
  JobAdmitter(const QueueCatalog* catalog, JobAdmitterOptions options)
      : catalog_(catalog), options_(std::move(options)) {}

  const std::string& default_local_queue() const { return options_.default_local_queue; }
  // Queues are on: some ClusterQueue or LocalQueue exists.
  bool active() const;
  // One admission pass over `jobs` (creation order) at `now_ms` (Unix ms). The answer is kept
  // (last()) until the next pass; the reference is valid until then.
  const AdmissionDecisions& Pass(const std::vector<const JobEntry*>& jobs, int64_t now_ms);
  // The usage per ClusterQueue the last pass saw (get clusterqueues, metrics); empty before one.
  const std::vector<admission::ClusterQueueUsage>& usage() const { return usage_; }
  // The last pass's pending jobs per ClusterQueue, in queue order (describe clusterqueue).
  const AdmissionDecisions& last() const { return last_; }

  // Fair sharing's decayed usage per ClusterQueue, as of the last pass.
  const std::vector<admission::UsageHistory>& history() const { return history_; }
  // Replaces the history (the stored one, after a restart); the next pass decays it to its time.
  void RestoreHistory(std::vector<admission::UsageHistory> history) {
    history_ = std::move(history);
  }

  // The admission checks the job's admission waits for, in its ClusterQueue's order: those of the
  // ClusterQueue that apply to the flavors it was given (a check's onFlavors; all when empty) and
  // are not in admission_checks_ready. Empty without a managed admission, or when its
  // ClusterQueue is gone (the quota is then let go elsewhere).
  std::vector<std::string> PendingChecks(const v1::JobStatus& st) const;
  // The checks of ClusterQueue `cluster_queue` by name (empty when it has none or is absent).
  std::vector<std::string> ChecksOf(const std::string& cluster_queue) const;

  // Whether the job's admission still holds quota at `now_ms` (see the header comment).
  static bool HoldsQuota(const JobEntry& job, int64_t now_ms) {
    return HoldsQuota(job.record.status, now_ms);
  }
  static bool HoldsQuota(const v1::JobStatus& status, int64_t now_ms) {
    return HoldsQuota(status) ||
           (status.has_admission() && now_ms < status.lost_node_hold_unix_ms());
  }
  // By its status alone: whether a rank has not stopped (ignoring a silent node's hold).
  static bool HoldsQuota(const v1::JobStatus& status);
  // Whether a job without an admission waits in its queue now.
  static bool Queued(const JobEntry& job);

 private:
  // Fills inputs_ for a pass over `jobs`, and `out`'s unresolved waits and job indices.
  void FillInputs(const std::vector<const JobEntry*>& jobs, int64_t now_ms,
                  AdmissionDecisions& out);

  const QueueCatalog* catalog_;
  JobAdmitterOptions options_;
  std::vector<admission::UsageHistory> history_;
  std::vector<admission::ClusterQueueUsage> usage_;
  AdmissionDecisions last_;
  // Whether some ClusterQueue has admission checks: PendingChecks, asked for every admitted job
  // on every pass, looks no further when none has. Kept per catalog generation.
  bool AnyAdmissionChecks() const;

  // The engine's inputs of the last pass, kept so that the next one reuses their storage.
  admission::AdmissionInputs inputs_;
  mutable uint64_t checks_seen_generation_ = UINT64_MAX;
  mutable bool any_checks_ = false;
};

// Fills `w` with the engine's view of one job (its queue, priority, requests, admission), every
// field set, reusing the storage `w` already has (a workload of an earlier pass, maybe another
// job's). Or, leaving `w` as it was, returns the wait that keeps the job out (a missing priority
// class). Pure.
std::optional<admission::PendingWorkload> FillWorkload(const JobEntry& job,
                                                       const QueueCatalog& catalog,
                                                       admission::Workload& w);

// The engine's spelling of a wait kind in JobStatus.queue_wait.kind ("Quota", "NeverFits", ...).
const char* WaitKindName(admission::WaitKind kind);

}  // namespace trainlet::coordinator
