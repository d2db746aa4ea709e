#include "coordinator/admission_flavors.h"

#include <algorithm>

#include "coordinator/admission_reasons.h"

namespace trainlet::coordinator::admission {

int Catalog::ResourceIndex(const std::string& name) const {
  for (size_t i = 0; i < resource_names.size(); ++i)
    if (resource_names[i] == name) return static_cast<int>(i);
  return -1;
}

int Catalog::FlavorIndex(const std::string& name) const {
  for (size_t i = 0; i < flavor_names.size(); ++i)
    if (flavor_names[i] == name) return static_cast<int>(i);
  return -1;
}

bool FlavorMatchesSelector(const std::map<std::string, std::string>& selector,
                           const std::map<std::string, std::string>& flavor_labels) {
  for (const auto& [key, value] : selector) {
    auto it = flavor_labels.find(key);
    if (it != flavor_labels.end() && it->second != value) return false;
  }
  return true;
}

bool ToleratesTaint(const Toleration& t, const Taint& taint) { return TolerationMatches(t, taint); }

const Taint* UntoleratedTaint(const std::vector<Taint>& taints,
                              const std::vector<Toleration>& workload,
                              const std::vector<Toleration>& flavor) {
  auto tolerated = [](const std::vector<Toleration>& list, const Taint& taint) {
    return std::any_of(list.begin(), list.end(),
                       [&](const Toleration& t) { return ToleratesTaint(t, taint); });
  };
  for (const Taint& taint : taints) {
    if (!TaintBlocks(taint)) continue;
    if (!tolerated(workload, taint) && !tolerated(flavor, taint)) return &taint;
  }
  return nullptr;
}

namespace {

// Whether the rating `mode` of a flavor is taken at once, or the next flavor is tried first
// (the negation of Kueue's shouldTryNextFlavor).
bool TakeAtOnce(FitMode mode, bool borrowing, const FlavorFungibility& f) {
  if (mode == FitMode::kFit) return !borrowing || !f.try_next_when_can_borrow;
  if (mode == FitMode::kPreempt && !f.try_next_when_can_preempt) {
    return !borrowing || !f.try_next_when_can_borrow;
  }
  return false;
}

// The taint of flavor `f` that keeps a workload with `tolerations` off it; null when none does.
const Taint* FlavorTaintBlocks(const Catalog& catalog, int f,
                               const std::vector<Toleration>& tolerations) {
  if (f >= static_cast<int>(catalog.flavor_taints.size()) || catalog.flavor_taints[f].empty()) {
    return nullptr;
  }
  static const std::vector<Toleration> kNone;
  return UntoleratedTaint(catalog.flavor_taints[f], tolerations,
                          f < static_cast<int>(catalog.flavor_tolerations.size())
                              ? catalog.flavor_tolerations[f]
                              : kNone);
}

// One resource group's outcome.
struct GroupOutcome {
  FitMode mode = FitMode::kNoFit;
  bool never = false;
  int flavor = -1;
  int short_slot = -1;
  int64_t short_need = 0;
  std::string message;
};

// One flavor's rating for the group's resources of `demand`.
struct FlavorRating {
  FitMode mode = FitMode::kFit;
  bool never = false;
  bool borrowing = false;
  int short_slot = -1;
  int64_t short_need = 0;
  int never_resource = -1;
  int64_t never_need = 0, never_potential = -1;
};

FlavorRating RateFlavor(const Catalog& catalog, const QueueModel& queue, int cq, int g, int f,
                        Demand demand, const QuotaLedger& ledger,
                        bool can_preempt_while_borrowing) {
  FlavorRating out;
  for (const auto& [r, amount] : demand) {
    if (queue.group_of_resource[r] != g) continue;
    const int slot = catalog.Slot(f, r);
    const int64_t potential = ledger.Potential(cq, slot);
    if (amount > potential) {
      out.never = true;
      out.never_resource = r;
      out.never_need = amount;
      out.never_potential = potential;
      return out;
    }
    const int64_t nominal = ledger.Quota(cq, slot).nominal;
    if (ledger.Effective(cq, slot) + amount > nominal) out.borrowing = true;
    if (amount <= ledger.Available(cq, slot)) continue;
    const FitMode m =
        amount <= nominal || can_preempt_while_borrowing ? FitMode::kPreempt : FitMode::kNoFit;
    if (out.short_slot < 0) {
      out.short_slot = slot;
      out.short_need = amount;
    }
    out.mode = std::min(out.mode, m);
  }
  return out;
}

GroupOutcome AssignGroup(const Catalog& catalog, const QueueModel& queue, int cq, int g,
                         Demand demand, const std::map<std::string, std::string>& selector,
                         const std::vector<Toleration>& tolerations, const QuotaLedger& ledger,
                         bool can_preempt_while_borrowing) {
  const QueueModel::Group& group = queue.groups[g];
  const FlavorFungibility& fungibility = queue.spec->fungibility;
  GroupOutcome out;
  bool any_possible = false, any_selector_match = false;
  int never_resource = -1;
  int64_t never_need = 0, never_potential = -1;
  std::string taint_message;  // the first flavor a taint kept out, in Kueue's words
  for (int f : group.flavors) {
    if (!selector.empty() && !FlavorMatchesSelector(selector, catalog.flavor_labels[f])) continue;
    any_selector_match = true;
    if (const Taint* taint = FlavorTaintBlocks(catalog, f, tolerations)) {
      if (taint_message.empty()) {
        taint_message =
            "untolerated taint " + TaintText(*taint) + " in flavor " + catalog.flavor_names[f];
      }
      continue;
    }
    const FlavorRating rating =
        RateFlavor(catalog, queue, cq, g, f, demand, ledger, can_preempt_while_borrowing);
    if (rating.never) {
      if (never_resource < 0 ||
          (rating.never_resource == never_resource && rating.never_potential > never_potential)) {
        never_resource = rating.never_resource;
        never_need = rating.never_need;
        never_potential = rating.never_potential;
      }
      continue;
    }
    const bool take = TakeAtOnce(rating.mode, rating.borrowing, fungibility);
    if (take || !any_possible || rating.mode > out.mode) {
      out.mode = rating.mode;
      out.flavor = f;
      out.short_slot = rating.short_slot;
      out.short_need = rating.short_need;
    }
    any_possible = true;
    if (take) break;
  }
  if (any_possible) return out;
  out.never = true;
  const std::string& cq_name = queue.spec->name;
  if (never_resource >= 0) {
    out.message = NeverFitsMessage(catalog.resource_names[never_resource], "", never_need, cq_name,
                                   std::max<int64_t>(0, never_potential), ledger.CohortOf(cq) >= 0);
    return out;
  }
  int first_resource = -1;
  for (const auto& [r, amount] : demand) {
    if (queue.group_of_resource[r] == g && first_resource < 0) first_resource = r;
  }
  if (any_selector_match) {
    out.message = "can never fit: no flavor of ClusterQueue " + cq_name + " for " +
                  catalog.resource_names[first_resource] + " is tolerated: " + taint_message;
  } else {
    out.message = "can never fit: no flavor of ClusterQueue " + cq_name + " for " +
                  catalog.resource_names[first_resource] + " matches its nodeSelector";
  }
  return out;
}

}  // namespace

Assignment AssignFlavors(const Catalog& catalog, const QueueModel& queue, int cq, Demand demand,
                         const std::map<std::string, std::string>& selector,
                         const QuotaLedger& ledger, bool can_preempt_while_borrowing,
                         const std::vector<Toleration>& tolerations) {
  Assignment a;
  AssignFlavorsInto(catalog, queue, cq, demand, selector, tolerations, ledger,
                    can_preempt_while_borrowing, a);
  return a;
}

void AssignFlavorsInto(const Catalog& catalog, const QueueModel& queue, int cq, Demand demand,
                       const std::map<std::string, std::string>& selector,
                       const std::vector<Toleration>& tolerations, const QuotaLedger& ledger,
                       bool can_preempt_while_borrowing, Assignment& a) {
  a.mode = FitMode::kFit;
  a.never = false;
  a.borrowing = false;
  a.choices.clear();
  a.message.clear();
  a.short_slot = -1;
  a.short_need = 0;
  for (const auto& [r, amount] : demand) {
    const int g =
        r < static_cast<int>(queue.group_of_resource.size()) ? queue.group_of_resource[r] : -1;
    if (g < 0) {
      a.never = true;
      a.mode = FitMode::kNoFit;
      a.message = "can never fit: ClusterQueue " + queue.spec->name + " has no quota for " +
                  catalog.resource_names[r];
      return;
    }
  }
  auto asks = [&](int g) {
    for (const auto& [r, amount] : demand)
      if (queue.group_of_resource[r] == g) return true;
    return false;
  };
  for (int g = 0; g < static_cast<int>(queue.groups.size()); ++g) {
    if (!asks(g)) continue;
    GroupOutcome o = AssignGroup(catalog, queue, cq, g, demand, selector, tolerations, ledger,
                                 can_preempt_while_borrowing);
    if (o.never) {
      a.never = true;
      a.mode = FitMode::kNoFit;
      a.message = std::move(o.message);
      a.choices.clear();
      return;
    }
    if (o.mode != FitMode::kFit && (a.short_slot < 0 || o.mode < a.mode)) {
      a.short_slot = o.short_slot;
      a.short_need = o.short_need;
    }
    a.mode = std::min(a.mode, o.mode);
    for (const auto& [r, amount] : demand) {
      if (queue.group_of_resource[r] != g) continue;
      const int slot = catalog.Slot(o.flavor, r);
      const bool fits = amount <= ledger.Available(cq, slot);
      a.choices.push_back({r, o.flavor, slot, amount, fits ? FitMode::kFit : o.mode});
      if (ledger.Effective(cq, slot) + amount > ledger.Quota(cq, slot).nominal) a.borrowing = true;
    }
  }
}

}  // namespace trainlet::coordinator::admission
