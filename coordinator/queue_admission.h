// Queue admission: Kueue's quota, queueing, preemption and fair-sharing rules as one pure pass.
//
// RunAdmissionPass takes a snapshot of the queue objects (ResourceFlavors, ClusterQueues,
// LocalQueues), the namespaces' labels and every workload, pending and admitted, and answers
// which pending workloads to admit now (with the flavor of each resource), which admitted ones
// to preempt and for whom, and for every pending workload left, why it waits. It keeps no
// state, does no I/O and reads no clock: `now_ms` (Unix milliseconds) is used only to decay the
// usage history. The same inputs give the same result. Safe from any thread; the caller owns
// everything. Cost: about O(W log W + W * Q) for W workloads and Q ClusterQueues.
//
// The rules, as Kueue v1beta1 has them:
//  - A pending workload waits in LocalQueue <namespace>/<local_queue> (the config's default
//    LocalQueue when it has none), which feeds one ClusterQueue; the ClusterQueue's
//    namespaceSelector must select the namespace. A workload with no queue and no default
//    LocalQueue is admitted unmanaged, without quota (Kueue's manageJobsWithoutQueueName:
//    false). With no ClusterQueue and no LocalQueue at all, every pending workload is admitted
//    unmanaged: queues are opt-in.
//  - It is admitted only when its whole gang (per-pod requests x pod_count) fits, for every
//    resource it asks, in the flavor chosen for that resource's group (admission_flavors.h),
//    within the ClusterQueue's nominal quota plus what it may borrow from its cohort
//    (admission_quota.h: borrowingLimit, lendingLimit).
//  - Each ClusterQueue orders its pending workloads by priority, then age (admission_order.h).
//    StrictFIFO: a head that does not fit blocks the ones behind it; BestEffortFIFO: the next
//    one is tried. A workload that can never fit (more than the ClusterQueue can reach even
//    with the whole cohort lent to it, a resource or flavor it has no quota for) says so and
//    blocks nobody.
//  - Heads of different ClusterQueues take quota in Kueue's order: within nominal before
//    borrowing; with fair sharing, lowest weighted dominant share first (and, given a usage
//    history with a half-life, the one that used less recently); then priority, then age.
//  - A head that does not fit may preempt (admission_preemption.h; with fair sharing, cohort
//    victims are chosen by weighted share, as Kueue's fair sharing does). Victims keep their quota
//    until the caller stops them; the preemptor then waits (kPreempting) and the room being
//    freed is held for it, so nothing else is admitted into it. It is admitted by a later pass,
//    after the victims are gone. Workloads admitted in this pass are never victims in it.
//
// Quota is never exceeded: when the admitted usage given is within quota, the admitted usage
// after the pass is too (checked with TRAINLET_CHECK: a failure is a bug in the engine).
// Wrong references in the inputs (a LocalQueue naming a missing ClusterQueue, a flavor that no
// ResourceFlavor defines) are reported as wait reasons, never by aborting.
#pragma once

#include <cstdint>

#include "common/status.h"
#include "coordinator/admission_types.h"

namespace trainlet::coordinator::admission {

AdmissionResult RunAdmissionPass(const AdmissionInputs& inputs, int64_t now_ms);

// Whether the admitted workloads of `state` (those with an admission that is not unmanaged)
// are within every ClusterQueue's and cohort's quota. The error says which queue or cohort is
// over, and in what. A sampler may call it on any snapshot.
Status UsageWithinQuota(const AdmissionInputs& state);

// The state after the caller carried out `result` at now_ms: admitted workloads get their
// admission (admitted_ms = now_ms); when `victims_stopped`, preempted ones lose theirs and are
// pending again. For tests and simulations.
AdmissionInputs ApplyAdmissionResult(AdmissionInputs state, const AdmissionResult& result,
                                     int64_t now_ms, bool victims_stopped);
// The same, carried out on `state` in place.
void ApplyAdmissionResultTo(AdmissionInputs& state, const AdmissionResult& result, int64_t now_ms,
                            bool victims_stopped);

}  // namespace trainlet::coordinator::admission
