// The operator requests on Kueue's queue objects (QueueObjectsRequest, operator.proto): `get
// clusterqueues|localqueues|resourceflavors|workloadpriorityclasses` and `delete clusterqueue
// NAME` (and the other kinds). Kept apart from OperatorService so that who may ask (admins only,
// once access policies exist) is decided around one call.
//
// Owned by the coordinator's loop (the catalog and store are JobController's).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "coordinator/job_store.h"
#include "coordinator/queue_catalog.h"
#include "trainlet/v1/operator.pb.h"

namespace trainlet::coordinator {

// Lists the objects the request names (by namespace, then name), or deletes the one it names and
// lists it as it was. A ResourceFlavor or ClusterQueue that something uses (queue_in_use.h, over
// `jobs`, the controller's statuses) is not removed: it is marked Terminating (stored before the
// answer; QueueCatalog::MarkDeleting) at `now_ms` by `user`, and listed so, with what uses it; a
// delete of one already Terminating changes nothing. Invalid for a kind that is not one of
// Kueue's four (naming the kinds), or a delete without a name; NotFound naming the object for a
// name the catalog lacks; the store's errors for a delete it refused (the catalog then still
// holds the object as it was).
Result<v1::QueueObjectList> HandleQueueObjects(const v1::QueueObjectsRequest& request,
                                               QueueCatalog& catalog, JobStore& store,
                                               const std::vector<const v1::JobStatus*>& jobs,
                                               int64_t now_ms, const std::string& user);

// One object as the operator API shows it: its document, the columns of its kind, and for a
// ResourceFlavor or ClusterQueue its finalizer and, while Terminating, its deletion time and
// what uses it (over `jobs`). `usage` is left empty (the admission engine fills it).
v1::QueueObject DescribeQueueObject(const kueue::QueueObject& object, const QueueCatalog& catalog,
                                    const std::vector<const v1::JobStatus*>& jobs, int64_t now_ms);

}  // namespace trainlet::coordinator
