// trainletctl's commands on Kueue's queue objects (issue 14): `get clusterqueues|localqueues|
// resourceflavors|workloadpriorityclasses` (short names cq, lq, rf, wpc) and `delete` of one.
// They are created with `apply -f`, as TrainJobs are. Each command returns the exit code and
// prints its own errors.
#pragma once

#include <string>
#include <vector>

#include "trainlet/v1/operator.pb.h"
#include "trainletctl/commands.h"
#include "trainletctl/render.h"

namespace trainlet::cli {

// The queue kind a resource name means: "clusterqueues", "clusterqueue", "cq",
// "clusterqueue.kueue.x-k8s.io" or "ClusterQueue" -> "ClusterQueue" (and so on for LocalQueue:
// localqueues, lq; ResourceFlavor: resourceflavors, rf; WorkloadPriorityClass:
// workloadpriorityclasses, wpc); "" for any other. "cq/NAME" sets `name` when it is empty.
std::string QueueKindOf(std::string resource, std::string& name);

// get: one object or every one of the kind (LocalQueues: in -n NS, or every namespace with -A),
// as a table or -o json|yaml|name.
int CmdGetQueueObjects(const CommonFlags& f, const std::string& kind, const std::string& name);
// delete: removes one object (LocalQueues: in -n NS). A ResourceFlavor or ClusterQueue in use
// stays Terminating (Kueue's resource-in-use finalizer): "deleted" is printed as kubectl does,
// and a note on stderr names what uses it.
int CmdDeleteQueueObject(const CommonFlags& f, const std::string& kind, const std::string& name);
// describe clusterqueue|resourceflavor NAME (`kind` ClusterQueue or ResourceFlavor; -o json|yaml
// for the object with its usage and jobs).
int CmdDescribeQueueObject(const CommonFlags& f, const std::string& kind, const std::string& name);

// The table of `get` (or the JSON, YAML or names) for objects of `kind`. Columns: NAME, COHORT,
// STRATEGY (ClusterQueue); NAMESPACE, NAME, CLUSTERQUEUE (LocalQueue); NAME, NODELABELS
// (ResourceFlavor); NAME, VALUE (WorkloadPriorityClass); then UsageColumns'; then, when some
// object listed is Terminating, STATUS (Active or Terminating).
std::string RenderQueueObjects(const v1::QueueObjectList& list, const std::string& kind,
                               OutputFormat format);

// The usage columns of a ClusterQueue or LocalQueue row, after the kind's own: headers when
// `usage` is null, else the cells of that object. Empty until the admission engine fills
// QueueUsage (PENDING, ADMITTED, usage against quota per flavor go here).
// The PENDING, ADMITTED and USAGE cells (header cells when `usage` is null) of a ClusterQueue
// or LocalQueue row; none for the other kinds.
std::vector<std::string> UsageColumns(const std::string& kind, const v1::QueueUsage* usage);
// A quantity of `resource` as a person reads it: cpu "1500m" or "2", memory "4Gi", else a count.
std::string QueueQuantity(const std::string& resource, int64_t amount);
// describe clusterqueue: its quota and use per flavor, then its jobs in order with why each waits;
// while Terminating, since when and what uses it.
std::string DescribeClusterQueue(const v1::QueueObject& object);
// describe resourceflavor: its node labels; while Terminating, since when and what uses it.
std::string DescribeResourceFlavor(const v1::QueueObject& object);

}  // namespace trainlet::cli
