// Flavor assignment: which flavor of each resource group a workload would use in its
// ClusterQueue, and whether it fits there now, only by preempting, or never.
//
// Kueue's rules with its default flavorFungibility (whenCanBorrow: Borrow, whenCanPreempt:
// TryNextFlavor): in each resource group the flavors are tried in order; a flavor is skipped
// when the workload's nodeSelector disagrees with one of the flavor's node labels (a selector
// key the flavor does not label is left to the planner); the first flavor where every requested
// resource of the group fits, borrowing included, is taken; when none fits, the first flavor
// where preemption could make room is remembered. Pure: reads the ledger, changes nothing.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "coordinator/admission_quota.h"
#include "coordinator/admission_types.h"

namespace trainlet::coordinator::admission {

// Names interned to dense indices for one pass. Slot = flavor * resources + resource.
struct Catalog {
  std::vector<std::string> resource_names;
  std::vector<std::string> flavor_names;
  std::vector<std::map<std::string, std::string>> flavor_labels;
  std::vector<bool> flavor_declared;  // a ResourceFlavor of that name exists
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
Assignment AssignFlavors(const Catalog& catalog, const QueueModel& queue, int cq, Demand demand,
                         const std::map<std::string, std::string>& selector,
                         const QuotaLedger& ledger, bool can_preempt_while_borrowing);
// The same into `out`, reusing its storage (a pass evaluates thousands of workloads).
void AssignFlavorsInto(const Catalog& catalog, const QueueModel& queue, int cq, Demand demand,
                       const std::map<std::string, std::string>& selector,
                       const QuotaLedger& ledger, bool can_preempt_while_borrowing,
                       Assignment& out);

// Whether a workload with this nodeSelector may use a flavor with these node labels: every
// selector key the flavor labels has the flavor's value.
bool FlavorMatchesSelector(const std::map<std::string, std::string>& selector,
                           const std::map<std::string, std::string>& flavor_labels);

}  // namespace trainlet::coordinator::admission
