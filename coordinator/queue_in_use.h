// What keeps a Terminating ResourceFlavor or ClusterQueue (Kueue's finalizer
// kueue.x-k8s.io/resource-in-use; QueueCatalog::MarkDeleting), and the step that removes those
// nothing keeps any more. As Kueue's ResourceFlavor and ClusterQueue controllers have it:
//   - a ResourceFlavor is in use while a ClusterQueue (a Terminating one too) names it in its
//     resourceGroups; in trainlet also while a job whose admission still holds quota
//     (JobAdmitter::HoldsQuota) was given it, since the flavor's nodeLabels keep that job's
//     ranks on their nodes (flavor_constraint.h) even after its ClusterQueue stopped naming it;
//   - a ClusterQueue is in use while an admission to it holds quota (Kueue: while workloads
//     reserve quota in it). Its pending jobs do not keep it: while Terminating it admits none
//     of them, and they wait with kind ClusterQueueTerminating (queue_admission.h).
// Pure functions of their arguments, but FinishUnusedQueueDeletes, which writes through the
// catalog; on the coordinator's loop.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "coordinator/job_store.h"
#include "coordinator/queue_catalog.h"
#include "trainlet/v1/operator.pb.h"

namespace trainlet::coordinator {

// At most this many users are named (QueueObject.in_use_by), then "... and N more".
inline constexpr size_t kInUseShown = 20;

// What uses `object` now, by kind: "ClusterQueue research" (by name), then "TrainJob
// team-a/llm-7" (in the order of `jobs`), at most kInUseShown; empty when nothing does, or for
// a kind without the finalizer. `jobs` are the controller's statuses (names are job keys). A job
// uses what its admission names while it holds that quota at `now_ms`, a lost node's hold
// included (JobAdmitter::HoldsQuota).
std::vector<std::string> QueueObjectUsers(const kueue::QueueObject& object,
                                          const QueueCatalog& catalog,
                                          const std::vector<const v1::JobStatus*>& jobs,
                                          int64_t now_ms);

// Removes every Terminating object nothing uses any more (QueueCatalog::Delete: the object and
// its mark in one store transaction), ClusterQueues first, so a flavor only they named goes in
// the same call. Each removal is logged; a store error is logged and the object stays, to be
// tried again by the next call (`failed` counts them).
struct QueueDeletesDone {
  size_t removed = 0;
  size_t failed = 0;
};
QueueDeletesDone FinishUnusedQueueDeletes(QueueCatalog& catalog, JobStore& store,
                                          const std::vector<const v1::JobStatus*>& jobs,
                                          int64_t now_ms);

}  // namespace trainlet::coordinator
