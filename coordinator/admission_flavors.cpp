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

namespace {

// One resource group's outcome.
struct GroupOutcome {
  FitMode mode = FitMode::kNoFit;
  bool never = false;
  int flavor = -1;
  int short_slot = -1;
  int64_t short_need = 0;
  std::string message;
};

GroupOutcome AssignGroup(const Catalog& catalog, const QueueModel& queue, int cq, int g,
                         Demand demand, const std::map<std::string, std::string>& selector,
                         const QuotaLedger& ledger, bool can_preempt_while_borrowing) {
  const QueueModel::Group& group = queue.groups[g];
  GroupOutcome out;
  bool any_possible = false, any_selector_match = false;
  int first_resource = -1;
  int never_resource = -1;
  int64_t never_need = 0, never_potential = -1;
  for (int f : group.flavors) {
    if (!selector.empty() && !FlavorMatchesSelector(selector, catalog.flavor_labels[f])) continue;
    any_selector_match = true;
    FitMode mode = FitMode::kFit;
    bool never = false;
    int short_slot = -1;
    int64_t short_need = 0;
    for (const auto& [r, amount] : demand) {
      if (queue.group_of_resource[r] != g) continue;
      const int slot = catalog.Slot(f, r);
      const int64_t potential = ledger.Potential(cq, slot);
      if (amount > potential) {
        never = true;
        if (never_resource < 0 || (r == never_resource && potential > never_potential)) {
          never_resource = r;
          never_need = amount;
          never_potential = potential;
        }
        break;
      }
      if (amount <= ledger.Available(cq, slot)) continue;
      const FitMode m = amount <= ledger.Quota(cq, slot).nominal || can_preempt_while_borrowing
                            ? FitMode::kPreempt
                            : FitMode::kNoFit;
      if (short_slot < 0) {
        short_slot = slot;
        short_need = amount;
      }
      mode = std::min(mode, m);
    }
    if (never) continue;
    if (!any_possible || mode > out.mode) {
      out.mode = mode;
      out.flavor = f;
      out.short_slot = short_slot;
      out.short_need = short_need;
    }
    any_possible = true;
    if (mode == FitMode::kFit) break;
  }
  if (any_possible) return out;
  out.never = true;
  const std::string& cq_name = queue.spec->name;
  for (const auto& [r, amount] : demand) {
    if (queue.group_of_resource[r] == g && first_resource < 0) first_resource = r;
  }
  if (!any_selector_match) {
    out.message = "can never fit: no flavor of ClusterQueue " + cq_name + " for " +
                  catalog.resource_names[first_resource] + " matches its nodeSelector";
  } else {
    out.message = NeverFitsMessage(catalog.resource_names[never_resource], "", never_need, cq_name,
                                   std::max<int64_t>(0, never_potential), ledger.CohortOf(cq) >= 0);
  }
  return out;
}

}  // namespace

Assignment AssignFlavors(const Catalog& catalog, const QueueModel& queue, int cq, Demand demand,
                         const std::map<std::string, std::string>& selector,
                         const QuotaLedger& ledger, bool can_preempt_while_borrowing) {
  Assignment a;
  AssignFlavorsInto(catalog, queue, cq, demand, selector, ledger, can_preempt_while_borrowing, a);
  return a;
}

void AssignFlavorsInto(const Catalog& catalog, const QueueModel& queue, int cq, Demand demand,
                       const std::map<std::string, std::string>& selector,
                       const QuotaLedger& ledger, bool can_preempt_while_borrowing, Assignment& a) {
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
    GroupOutcome o =
        AssignGroup(catalog, queue, cq, g, demand, selector, ledger, can_preempt_while_borrowing);
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
