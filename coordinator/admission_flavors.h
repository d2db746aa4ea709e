// Flavor assignment: which flavor of each resource group a workload would use in its
// ClusterQueue, and whether it fits there now, only by preempting, or never.
//
// Kueue's flavor assigner: in each resource group the flavors are tried in order. A flavor is
// skipped when the workload's nodeSelector disagrees with one of the flavor's node labels (a
// selector key the flavor does not label is left to the planner), or when the flavor has a
// NoSchedule or NoExecute node taint that neither the workload's tolerations nor the flavor's
// own tolerations tolerate. Each flavor left is rated: fits now (borrowing or not), fits only by
// preempting, or does not fit. The ClusterQueue's flavorFungibility says which rating is taken
// at once (Kueue's shouldTryNextFlavor): a fit that needs no borrowing always; a fit that
// borrows unless whenCanBorrow is TryNextFlavor; a preempting fit only with whenCanPreempt
// Preempt (and, when it would also borrow, whenCanBorrow Borrow). Otherwise the next flavor is
// tried, and when none is taken the best rating seen wins, the earliest among equals. Kueue's
// defaults (Borrow, TryNextFlavor) take the first flavor that fits, borrowing included, and
// else the first where preemption could make room. Pure: reads the ledger, changes nothing.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "coordinator/admission_quota.h"
#include "coordinator/admission_types.h"
#include "coordinator/taint_rules.h"  // TaintText

namespace trainlet::coordinator::admission {

// Names interned to dense indices for one pass. Slot = flavor * resources + resource.
struct Catalog {
  std::vector<std::string> resource_names;
  std::vector<std::string> flavor_names;
  std::vector<std::map<std::string, std::string>> flavor_labels;
  std::vector<bool> flavor_declared;  // a ResourceFlavor of that name exists
  // By flavor (may be shorter than flavor_names: missing entries have none): the NoSchedule and
  // NoExecute taints (the only ones that keep a workload off) and the flavor's tolerations.
  std::vector<std::vector<Taint>> flavor_taints;
  std::vector<std::vector<Toleration>> flavor_tolerations;
  std::vector<int> resource_of_slot;
  std::vector<std::string> slot_names;  // "nvidia.com/gpu in flavor h100"

  int resources() const { return static_cast<int>(resource_names.size()); }
  int Slot(int flavor, int resource) const { return flavor * resources() + resource; }
  int ResourceIndex(const std::string& name) const;  // -1 when unknown
  int FlavorIndex(const std::string& name) const;    // -1 when unknown
};

// One ClusterQueue, interned.
struct QueueModel {
  const ClusterQueue* spec = nullptr;
  struct Group {
    std::vector<int> resources;
    std::vector<int> flavors;  // in the order they are tried
  };
  std::vector<Group> groups;
  std::vector<int> group_of_resource;  // per resource index; -1 when no group covers it
  std::string inactive;                // non-empty: why no workload can be admitted
};

// A workload's total requests (per-pod x pod count), by resource index, zero amounts dropped.
using Demand = std::span<const std::pair<int, int64_t>>;

enum class FitMode { kNoFit = 0, kPreempt = 1, kFit = 2 };

struct SlotChoice {
  int resource = 0, flavor = 0, slot = 0;
  int64_t amount = 0;
  FitMode mode = FitMode::kFit;
};

struct Assignment {
  FitMode mode = FitMode::kFit;  // the worst over the workload's resources
  bool never = false;            // cannot fit even with the queue and cohort empty
  bool borrowing = false;        // would take some slot above nominal
  std::vector<SlotChoice> choices;
  std::string message;  // for `never`: why; otherwise empty (wait reasons are built later)
  // When not kFit: the first resource that is short in the chosen flavor.
  int short_slot = -1;
  int64_t short_need = 0;
};

// can_preempt_while_borrowing: the queue's borrowWithinCohort policy is not Never.
// `tolerations`: the workload's (its pod template's).
Assignment AssignFlavors(const Catalog& catalog, const QueueModel& queue, int cq, Demand demand,
                         const std::map<std::string, std::string>& selector,
                         const QuotaLedger& ledger, bool can_preempt_while_borrowing,
                         const std::vector<Toleration>& tolerations = {});
// The same into `out`, reusing its storage (a pass evaluates thousands of workloads).
void AssignFlavorsInto(const Catalog& catalog, const QueueModel& queue, int cq, Demand demand,
                       const std::map<std::string, std::string>& selector,
                       const std::vector<Toleration>& tolerations, const QuotaLedger& ledger,
                       bool can_preempt_while_borrowing, Assignment& out);

// Kubernetes' rule: a toleration with an effect matches only that effect; with a key, only that
// key (an empty key with Exists matches every taint); Exists matches any value, Equal ("") the
// same value.
bool ToleratesTaint(const Toleration& toleration, const Taint& taint);
// The first of `taints` (NoSchedule / NoExecute ones) that neither list tolerates; null if none.
const Taint* UntoleratedTaint(const std::vector<Taint>& taints,
                              const std::vector<Toleration>& workload,
                              const std::vector<Toleration>& flavor);

// Whether a workload with this nodeSelector may use a flavor with these node labels: every
// selector key the flavor labels has the flavor's value.
bool FlavorMatchesSelector(const std::map<std::string, std::string>& selector,
                           const std::map<std::string, std::string>& flavor_labels);

}  // namespace trainlet::coordinator::admission
