// The plain inputs and outputs of the queue admission engine (queue_admission.h).
//
// These mirror Kueue's kueue.x-k8s.io/v1beta1 objects (ResourceFlavor, ClusterQueue, LocalQueue)
// and a Workload, but hold only what admission needs, already parsed: quantities are int64 in
// the resource's base unit (cpu in millicores, memory in bytes, GPUs and every other resource
// as a count). Nothing here refers to the YAML parser, the store or JobController: whoever
// calls the engine copies its own objects into these structs. Plain values, no invariants
// beyond the field comments; the engine reports bad references (a missing ClusterQueue) as
// wait reasons, never by aborting.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace trainlet::coordinator::admission {

// Resource names as Kubernetes spells them.
inline constexpr char kCpu[] = "cpu";        // millicores
inline constexpr char kMemory[] = "memory";  // bytes

// ---- Queue objects ----

// Kubernetes' taint and toleration (a ResourceFlavor's nodeTaints and tolerations, a pod
// template's tolerations).
struct Taint {
  std::string key, value, effect;  // NoSchedule, PreferNoSchedule, NoExecute
};
struct Toleration {
  std::string key, op, value, effect;  // op: "Equal" ("" reads as Equal) or "Exists"
};

struct ResourceFlavor {
  std::string name;
  std::map<std::string, std::string> node_labels;  // a workload's nodeSelector must agree
  // A workload may be given this flavor only when its tolerations, with `tolerations`, tolerate
  // every NoSchedule and NoExecute taint here.
  std::vector<Taint> node_taints;
  std::vector<Toleration> tolerations;
};

// One resource's quota in one flavor of a ClusterQueue.
struct ResourceQuota {
  std::string resource;  // "cpu", "memory", "nvidia.com/gpu", ...
  int64_t nominal = 0;
  std::optional<int64_t> borrowing_limit;  // unset: may borrow all the cohort lends
  std::optional<int64_t> lending_limit;    // unset: the cohort may borrow all of nominal
};

struct FlavorQuotas {
  std::string flavor;  // a ResourceFlavor's name
  std::vector<ResourceQuota> resources;
};

// Resources that must come from one flavor together; flavors are tried in this order.
struct ResourceGroup {
  std::vector<std::string> covered_resources;
  std::vector<FlavorQuotas> flavors;
};

enum class QueueingStrategy { kBestEffortFifo, kStrictFifo };
enum class WithinClusterQueuePolicy { kNever, kLowerPriority, kLowerOrNewerEqualPriority };
enum class ReclaimWithinCohortPolicy { kNever, kLowerPriority, kAny };
enum class BorrowWithinCohortPolicy { kNever, kLowerPriority };

// ClusterQueue.spec.flavorFungibility (admission_flavors.h has the rule); Kueue's defaults.
struct FlavorFungibility {
  bool try_next_when_can_borrow = false;  // whenCanBorrow: TryNextFlavor (else Borrow)
  bool try_next_when_can_preempt = true;  // whenCanPreempt: TryNextFlavor (else Preempt)
};

struct PreemptionPolicy {
  WithinClusterQueuePolicy within_cluster_queue = WithinClusterQueuePolicy::kNever;
  ReclaimWithinCohortPolicy reclaim_within_cohort = ReclaimWithinCohortPolicy::kNever;
  BorrowWithinCohortPolicy borrow_within_cohort = BorrowWithinCohortPolicy::kNever;
  // With borrow_within_cohort LowerPriority: only workloads of priority <= this may be
  // preempted by a workload that borrows. Unset: any priority below the preemptor's.
  std::optional<int32_t> max_priority_threshold;
};

// A Kubernetes label selector (metav1.LabelSelector).
struct LabelRequirement {
  enum class Op { kIn, kNotIn, kExists, kDoesNotExist };
  std::string key;
  Op op = Op::kIn;
  std::vector<std::string> values;
};
struct LabelSelector {
  std::map<std::string, std::string> match_labels;
  std::vector<LabelRequirement> match_expressions;
};

struct ClusterQueue {
  std::string name;
  std::string cohort;  // empty: in no cohort, neither lends nor borrows
  // As Kueue: unset selects no namespace, an empty selector selects every namespace.
  std::optional<LabelSelector> namespace_selector = LabelSelector{};
  QueueingStrategy strategy = QueueingStrategy::kBestEffortFifo;
  std::vector<ResourceGroup> resource_groups;
  PreemptionPolicy preemption;
  double fair_weight = 1.0;  // fairSharing.weight; 0 means it only gets what nobody else wants
  FlavorFungibility fungibility;
  // Deleted while jobs hold its quota (Kueue's resource-in-use finalizer): it admits nothing new,
  // its pending workloads wait (kClusterQueueTerminating); its admitted ones keep their quota.
  bool terminating = false;
};

struct LocalQueue {
  std::string namespace_;
  std::string name;
  std::string cluster_queue;
};

// ---- Workloads ----

// What an admitted workload holds: one flavor per resource, and the total amount.
struct ResourceAssignment {
  std::string resource;
  std::string flavor;
  int64_t amount = 0;  // requests x pod count
};

struct Admission {
  std::string cluster_queue;  // empty when admitted without a queue (see `unmanaged`)
  std::vector<ResourceAssignment> resources;
  bool borrowing = false;  // some resource went above the ClusterQueue's nominal quota
  bool unmanaged = false;  // admitted with no quota check: no queues, or no queue and no default
};

struct Workload {
  std::string key;  // unique: the caller's job key
  std::string namespace_ = "default";
  std::string local_queue;  // empty: the configured default LocalQueue
  int32_t priority = 0;
  int64_t creation_ms = 0;  // queue order among equal priorities (oldest first)
  // One pod's (node's) requests; the gang asks pod_count times this.
  std::map<std::string, int64_t> per_pod;
  int64_t pod_count = 1;
  std::map<std::string, std::string> node_selector;
  std::vector<Toleration> tolerations;  // the pod template's
  // Set when already admitted (running or placing): its quota is in use.
  std::optional<Admission> admission;
  int64_t admitted_ms = 0;  // when it was admitted; the newest are preempted first
};

// Decayed past usage of one ClusterQueue, for "who used less recently goes first".
struct UsageHistory {
  std::string cluster_queue;
  std::map<std::string, double> usage;  // resource -> decayed amount (amount x seconds)
  int64_t as_of_ms = 0;                 // when `usage` was last decayed
};

struct AdmissionConfig {
  // Where a workload without a queue label waits: LocalQueue <namespace>/<this>. Empty: such
  // workloads are admitted unmanaged (Kueue's manageJobsWithoutQueueName: false).
  std::string default_local_queue;
  // Kueue's fair sharing: ClusterQueues of a cohort competing for free cohort quota are served
  // lowest weighted share first.
  bool fair_sharing = false;
  // With fair sharing: the half-life of `history`; 0 ignores history.
  int64_t usage_half_life_ms = 0;
};

struct AdmissionInputs {
  std::vector<ResourceFlavor> flavors;
  std::vector<ClusterQueue> cluster_queues;
  std::vector<LocalQueue> local_queues;
  std::map<std::string, std::map<std::string, std::string>> namespace_labels;
  std::vector<Workload> workloads;  // pending and admitted, any order
  std::vector<UsageHistory> history;
  AdmissionConfig config;
};

// ---- Result of one pass ----

enum class PreemptionRule {
  kInClusterQueue,                 // a victim of the preemptor's own ClusterQueue
  kInCohortReclamation,            // quota the preemptor's ClusterQueue lent is taken back
  kInCohortReclaimWhileBorrowing,  // preempted in the cohort by a workload that borrows
  kInCohortFairSharing             // taken from a queue above its fair share (fair sharing)
};
const char* PreemptionRuleName(PreemptionRule rule);

struct Preemption {
  std::string victim;  // Workload::key
  std::string preemptor;
  PreemptionRule rule = PreemptionRule::kInClusterQueue;
  std::string message;  // "Preempted by team-a/llm-7 (priority 1000)"
};

enum class WaitKind {
  kNoLocalQueue,             // "LocalQueue team-a/q does not exist"
  kNoClusterQueue,           // "ClusterQueue x not found", or inactive (a flavor not found)
  kClusterQueueTerminating,  // "ClusterQueue x is terminating": deleted, admits nothing new
  kNamespaceNotSelected,     // the ClusterQueue's namespaceSelector leaves it out
  kNeverFits,                // more than the ClusterQueue can ever give, or a flavor/resource gap
  kQuota,                    // waits for quota to be freed
  kPreempting,               // waits for the workloads it preempted to stop
  kBlocked,                  // StrictFIFO: waits behind the head of its ClusterQueue
};

struct PendingWorkload {
  std::string key;
  std::string cluster_queue;  // empty when its queue could not be resolved
  WaitKind kind = WaitKind::kQuota;
  std::string message;
  int64_t position = 0;  // 0-based place among the pending of its ClusterQueue
  // Its index in AdmissionInputs::workloads (so a caller finds its own object without looking
  // the key up); -1 for waits made outside the engine.
  int workload = -1;
};

struct AdmissionResult {
  std::vector<std::pair<std::string, Admission>> admitted;  // key, in admission order
  std::vector<Preemption> preemptions;
  std::vector<PendingWorkload> pending;  // every pending workload not admitted, one each
};

}  // namespace trainlet::coordinator::admission
