// Preemption choice: which admitted workloads a pending one may preempt to fit, per its
// ClusterQueue's policy, as Kueue's preemptor does (pkg/scheduler/preemption).
//
// Candidates: with withinClusterQueue LowerPriority, the queue's own admitted workloads of lower
// priority (LowerOrNewerEqualPriority adds equal priority created later than the preemptor);
// with reclaimWithinCohort, the workloads of cohort members that borrow in a slot the preemptor
// needs (Any: every priority; LowerPriority: lower only). Only workloads holding a slot that is
// short count. Order: other queues' first (reclaiming what was lent), then lowest priority,
// then the most recently admitted. Minimal set: remove candidates in that order until the
// preemptor fits, then put back, newest removal first, every one it still fits without.
// Borrowing while preempting in the cohort needs borrowWithinCohort LowerPriority, and then
// only victims below maxPriorityThreshold+1 (and the preemptor's priority) may go; otherwise
// cohort victims are taken only while the queue stays within nominal, and a last try takes
// victims of the queue itself, borrowing allowed.
//
// With fair sharing (Kueue's fairSharing enabled), cohort victims are chosen by share instead,
// as Kueue's fairPreemptions with its default strategies: first LessThanOrEqualToFinalShare
// (take from the queue with the highest weighted dominant share while the preemptor's share with
// its request stays at or below that queue's share after the removal), then LessThanInitialShare
// (one workload from each queue whose share is above the preemptor's). Rule
// InCohortFairSharing.
//
// Works on the ledger by trial changes that it undoes before returning; not thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "coordinator/admission_flavors.h"
#include "coordinator/admission_quota.h"
#include "coordinator/admission_types.h"

namespace trainlet::coordinator::admission {

// An admitted workload as the preemptor sees it.
struct AdmittedWorkload {
  int workload = 0;  // index into AdmissionInputs::workloads
  int cq = 0;
  int32_t priority = 0;
  int64_t creation_ms = 0, admitted_ms = 0;
  const std::string* key = nullptr;
  std::vector<std::pair<int, int64_t>> usage;  // slot, amount
  bool victim = false;                         // already chosen in this pass
};

struct PreemptionView {
  std::vector<AdmittedWorkload>* admitted = nullptr;
  const std::vector<std::vector<int>>* admitted_by_cq = nullptr;  // indices into *admitted
  const std::vector<std::vector<int>>* cohort_members = nullptr;  // cq indices by cohort
  const std::vector<const ClusterQueue*>* specs = nullptr;        // by cq index
  const std::vector<int>* resource_of_slot = nullptr;             // for dominant shares
  bool fair_sharing = false;
};

struct PreemptionTarget {
  int admitted = 0;  // index into *view.admitted
  PreemptionRule rule = PreemptionRule::kInClusterQueue;
};

struct Preemptor {
  int cq = 0;
  int32_t priority = 0;
  int64_t creation_ms = 0;
};

// The minimal set of victims that lets `who` fit with `assignment` (whose mode is kPreempt), or
// empty when no allowed set does. The ledger is left as it was.
std::vector<PreemptionTarget> ChooseVictims(QuotaLedger& ledger, const PreemptionView& view,
                                            const Preemptor& who, const Assignment& assignment);

}  // namespace trainlet::coordinator::admission
