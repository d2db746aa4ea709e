// The operator requests on Kueue's queue objects (QueueObjectsRequest, operator.proto): `get
// clusterqueues|localqueues|resourceflavors|workloadpriorityclasses` and `delete clusterqueue
// NAME` (and the other kinds). Kept apart from OperatorService so that who may ask (admins only,
// once access policies exist) is decided around one call.
//
// Owned by the coordinator's loop (the catalog and store are JobController's).
#pragma once

#include "common/status.h"
#include "coordinator/job_store.h"
#include "coordinator/queue_catalog.h"
#include "trainlet/v1/operator.pb.h"

namespace trainlet::coordinator {

// Lists the objects the request names (by namespace, then name), or deletes the one it names and
// lists it as it was. Invalid for a kind that is not one of Kueue's four (naming the kinds), or
// a delete without a name; NotFound naming the object for a name the catalog lacks; the store's
// errors for a delete it refused (the catalog then still holds the object).
Result<v1::QueueObjectList> HandleQueueObjects(const v1::QueueObjectsRequest& request,
                                               QueueCatalog& catalog, JobStore& store);

// One object as the operator API shows it: its document and the columns of its kind. `usage` is
// left empty (the admission engine fills it).
v1::QueueObject DescribeQueueObject(const kueue::QueueObject& object);

}  // namespace trainlet::coordinator
