// Kueue's queue objects (kueue.x-k8s.io/v1beta1): ResourceFlavor, ClusterQueue, LocalQueue and
// WorkloadPriorityClass, as trainlet reads them from YAML.
//
// Every document is first checked against the CRD schema Kueue ships (v0.10.6, embedded in the
// binary: common/kueue/schemas/), so a file the Kubernetes API server would refuse is refused
// here too, with the field path. Then the rules Kueue's validating webhooks and CEL rules add are
// checked (ParseQueueDocument's comment lists them). Fields trainlet does not act on are warnings,
// never errors.
//
// Only the objects are modelled here; what they mean for admission (quota, borrowing,
// preemption) is the coordinator's. All functions are pure: no I/O, no global state besides the
// lazily compiled schemas; safe from any thread.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "common/trainjob/yaml_support.h"

namespace trainlet::kueue {

inline constexpr std::string_view kApiGroup = "kueue.x-k8s.io";
inline constexpr std::string_view kApiVersion = "kueue.x-k8s.io/v1beta1";
// The TrainJob labels Kueue reads (and trainlet too: TrainJob::queue_name, priority_class).
inline constexpr std::string_view kQueueNameLabel = "kueue.x-k8s.io/queue-name";
inline constexpr std::string_view kPriorityClassLabel = "kueue.x-k8s.io/priority-class";

// Kueue's limits (apis/kueue/v1beta1/clusterqueue_types.go).
inline constexpr size_t kMaxResourceGroups = 16;
inline constexpr size_t kMaxFlavorsPerGroup = 16;
inline constexpr size_t kMaxResourcesPerGroup = 16;

enum class Kind { kResourceFlavor, kClusterQueue, kLocalQueue, kWorkloadPriorityClass };
inline constexpr Kind kAllKinds[] = {Kind::kResourceFlavor, Kind::kClusterQueue, Kind::kLocalQueue,
                                     Kind::kWorkloadPriorityClass};
// "ResourceFlavor", "ClusterQueue", "LocalQueue", "WorkloadPriorityClass".
const char* KindName(Kind kind);
// The kind of that exact name, or nullopt.
std::optional<Kind> KindOf(std::string_view name);
// Whether objects of `kind` live in a namespace (only LocalQueue does).
inline bool Namespaced(Kind kind) { return kind == Kind::kLocalQueue; }
// Whether a document of this apiVersion and kind is Kueue's to parse (ParseQueueDocument): its
// apiVersion is in group kueue.x-k8s.io, or its kind is one of Kind. The TrainJob parser sets such
// documents aside for this one.
bool IsQueueDocument(std::string_view api_version, std::string_view kind);

// A quota or limit: the text as written and its amount in whole units of the resource: cpu in
// millicores, everything else (memory in bytes, GPUs and other counts) in ones, rounded up as
// Kubernetes rounds (the planner's units, coordinator/resources.h).
struct Quantity {
  std::string text;
  int64_t units = 0;
  bool operator==(const Quantity&) const = default;
};
// 1000 for "cpu" (millicores), 1 for any other resource.
int64_t UnitScale(std::string_view resource);

// A node taint (spec.nodeTaints) and a toleration (spec.tolerations), as Kubernetes spells them.
struct Taint {
  std::string key, value, effect;  // effect: NoSchedule, PreferNoSchedule or NoExecute
  bool operator==(const Taint&) const = default;
};
struct Toleration {
  std::string key, op, value, effect;  // op: Equal ("" reads as Equal) or Exists
  bool operator==(const Toleration&) const = default;
};

struct ResourceFlavor {
  std::string name;
  std::map<std::string, std::string> node_labels;  // spec.nodeLabels: nodes of this flavor
  // spec.nodeTaints: a workload may be assigned this flavor only when its pod template's
  // tolerations, with the flavor's own spec.tolerations, tolerate every NoSchedule and NoExecute
  // taint (Kueue's flavor assigner).
  std::vector<Taint> node_taints;
  std::vector<Toleration> tolerations;
};

// A Kubernetes LabelSelector (ClusterQueue.spec.namespaceSelector). Requirements' operators are
// In, NotIn, Exists and DoesNotExist.
struct LabelSelector {
  struct Requirement {
    std::string key, op;
    std::vector<std::string> values;
  };
  std::map<std::string, std::string> match_labels;
  std::vector<Requirement> match_expressions;
  // Whether `labels` satisfy every matchLabels entry and every requirement ({} matches all).
  bool Matches(const std::map<std::string, std::string>& labels) const;
};

struct ResourceQuota {
  std::string name;  // "cpu", "memory", "nvidia.com/gpu", ...
  Quantity nominal;
  std::optional<Quantity> borrowing_limit;  // nullopt: may borrow without limit (in a cohort)
  std::optional<Quantity> lending_limit;    // nullopt: may lend all of it (in a cohort)
};

struct FlavorQuotas {
  std::string name;                      // a ResourceFlavor's name
  std::vector<ResourceQuota> resources;  // in coveredResources' order
};

struct ResourceGroup {
  std::vector<std::string> covered_resources;
  std::vector<FlavorQuotas> flavors;  // tried in this order
};

enum class QueueingStrategy { kBestEffortFifo, kStrictFifo };
// "BestEffortFIFO", "StrictFIFO".
const char* QueueingStrategyName(QueueingStrategy strategy);

struct Preemption {
  enum class WithinClusterQueue { kNever, kLowerPriority, kLowerOrNewerEqualPriority };
  enum class ReclaimWithinCohort { kNever, kLowerPriority, kAny };
  enum class BorrowWithinCohort { kNever, kLowerPriority };
  WithinClusterQueue within_cluster_queue = WithinClusterQueue::kNever;
  ReclaimWithinCohort reclaim_within_cohort = ReclaimWithinCohort::kNever;
  BorrowWithinCohort borrow_within_cohort = BorrowWithinCohort::kNever;
  // borrowWithinCohort.maxPriorityThreshold: only jobs at or below it may be preempted.
  std::optional<int32_t> borrow_max_priority_threshold;
};

// spec.flavorFungibility: what the flavor assigner does when a flavor fits only by borrowing,
// or only by preempting: take it, or try the next flavor first (and come back to the best one
// seen when no later flavor does better). Kueue's defaults: Borrow, TryNextFlavor.
struct FlavorFungibility {
  enum class WhenCanBorrow { kBorrow, kTryNextFlavor };
  enum class WhenCanPreempt { kTryNextFlavor, kPreempt };
  WhenCanBorrow when_can_borrow = WhenCanBorrow::kBorrow;
  WhenCanPreempt when_can_preempt = WhenCanPreempt::kTryNextFlavor;
};

// One admission check of a ClusterQueue (spec.admissionChecks, or an entry of
// spec.admissionChecksStrategy.admissionChecks): a job admitted with one of `on_flavors` (any
// flavor when empty) is placed only once the check is Ready for it.
struct AdmissionCheckRef {
  std::string name;
  std::vector<std::string> on_flavors;
};

struct ClusterQueue {
  std::string name;
  // nullopt when spec.namespaceSelector is absent: Kueue then admits from no namespace. {} (an
  // empty selector) admits from every namespace.
  std::optional<LabelSelector> namespace_selector;
  std::vector<ResourceGroup> resource_groups;
  std::string cohort;  // "" for none
  QueueingStrategy queueing_strategy = QueueingStrategy::kBestEffortFifo;
  Preemption preemption;
  // spec.fairSharing.weight in thousandths (the default, 1, is 1000); 0 is allowed and means the
  // queue borrows only what no one else wants.
  int64_t fair_sharing_weight_milli = 1000;
  std::string stop_policy = "None";  // None, Hold, HoldAndDrain
  FlavorFungibility flavor_fungibility;
  std::vector<AdmissionCheckRef> admission_checks;  // in the order written
};

struct LocalQueue {
  std::string namespace_;  // "default" when metadata.namespace is unset
  std::string name;
  std::string cluster_queue;
  std::string stop_policy = "None";
};

struct WorkloadPriorityClass {
  std::string name;
  int32_t value = 0;
  std::string description;
};

// One parsed object: exactly the member of its kind is set.
struct QueueObject {
  Kind kind = Kind::kResourceFlavor;
  std::string namespace_;  // LocalQueue's; "" for the cluster-scoped kinds
  std::string name;
  std::string yaml;  // the document, re-emitted as YAML (comments are not kept): what is stored
  std::optional<ResourceFlavor> flavor;
  std::optional<ClusterQueue> cluster_queue;
  std::optional<LocalQueue> local_queue;
  std::optional<WorkloadPriorityClass> priority_class;
  // "clusterqueue/team-a", "localqueue/team-a/user-queue": how messages and apply results name it
  // (lowercase kind, as kubectl prints it).
  std::string Ref() const;
};

// Parses one document that IsQueueDocument accepted (`index` counts from 1 in its file, for
// messages). Errors (kInvalid) name the object and the field path, as the TrainJob parser does:
//   "ClusterQueue/team-a: spec.resourceGroups[0].flavors[0].resources[1].nominalQuota: ..."
//   "document 3: apiVersion: must be kueue.x-k8s.io/v1beta1, got \"kueue.x-k8s.io/v1alpha1\""
// Checked beyond the CRD schema, as Kueue's webhooks and CEL rules check:
//   - metadata.name an RFC 1123 subdomain; a LocalQueue's metadata.namespace an RFC 1123 label;
//   - each flavor of a resource group lists exactly the group's coveredResources, in order;
//   - a resource is covered by at most one group, a flavor is in at most one group;
//   - at most 16 resource groups, 16 flavors per group, 16 resources per group;
//   - quantities are non-negative; borrowingLimit and lendingLimit need a cohort; a lendingLimit
//     is at most the nominalQuota;
//   - preemption.borrowWithinCohort.policy other than Never needs reclaimWithinCohort other than
//     Never;
//   - fairSharing.weight is a non-negative quantity;
//   - LocalQueue.spec.clusterQueue is set;
//   - admissionChecks and admissionChecksStrategy are not both set (the CRD's CEL rule);
//   - WorkloadPriorityClass.value is an int32.
// Warnings (appended to `warnings`, each naming the object and path) for fields trainlet does not
// act on: ResourceFlavor topologyName, status, unknown fields.
Result<QueueObject> ParseQueueDocument(const YAML::Node& doc, int index,
                                       std::vector<std::string>* warnings);

// ParseQueueDocument over every non-empty document of `yaml_text` (a stored object, or a file
// holding only Kueue objects: the fuzz target). Errors as LoadDocuments' and ParseQueueDocument's;
// an object defined twice in the text is refused.
struct ParsedQueueObjects {
  std::vector<QueueObject> objects;
  std::vector<std::string> warnings;
};
Result<ParsedQueueObjects> ParseQueueDocuments(std::string_view yaml_text);
// Parses documents the TrainJob parser set aside (trainjob::ParsedFile::queue_documents).
Result<ParsedQueueObjects> ParseQueueDocuments(const std::vector<trainjob::YamlDocument>& docs);

}  // namespace trainlet::kueue
