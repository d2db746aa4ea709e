// FlavorConstraintOf: where the ResourceFlavors of a job's admission let its gang go.
//
// Kueue, when it admits a workload, injects the nodeLabels of every flavor it assigned into the
// pod template's nodeSelector and the flavors' tolerations into its tolerations
// (podset.FromAssignment), so the pods land only on nodes of those flavors. trainlet does the
// same at placement: this reads the flavors the admission names (JobStatus.admission.resources[]
// .flavor, stored with the admission before any rank starts, so a restarted coordinator places
// the job as the first one would) from the catalog, and the planner narrows the nodes to them
// (GangRequest::flavor, gang_planner.h). A flavor's nodeLabels edited after the admission apply
// from the job's next placement.
//
// Pure: reads the catalog, changes nothing. On the coordinator's loop (the catalog's thread).
#pragma once

#include "common/status.h"
#include "coordinator/gang_planner.h"
#include "coordinator/queue_catalog.h"
#include "trainlet/v1/operator.pb.h"

namespace trainlet::coordinator {

// The union of the nodeLabels and tolerations of the flavors `status`'s admission assigned, in
// the order the admission lists them. Empty (anywhere) with no admission, an unmanaged one, or
// one that assigned no resource (the job asked for none a ClusterQueue covers).
// Errors (the job is not placed; the message is its reason, with the job's condition):
//  - NotFound when a flavor of the admission is no longer applied ("admitted to ResourceFlavor
//    a100, which no longer exists: ..."); it is placed once the flavor is applied again. A flavor
//    deleted while an admission holding quota names it stays, Terminating (queue_in_use.h), so
//    this is left for stores written before that;
//  - Invalid when two of its flavors label one key differently (no node can carry both).
Result<FlavorConstraint> FlavorConstraintOf(const v1::JobStatus& status,
                                            const QueueCatalog& catalog);

}  // namespace trainlet::coordinator
