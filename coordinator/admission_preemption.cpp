#include "coordinator/admission_preemption.h"

#include <algorithm>
#include <optional>

namespace trainlet::coordinator::admission {
namespace {

struct Search {
  QuotaLedger& ledger;
  const PreemptionView& view;
  const Preemptor& who;
  const Assignment& assignment;
  std::vector<int> short_slots;  // slots whose mode is not kFit

  bool Uses(const AdmittedWorkload& w) const {
    for (const auto& [slot, amount] : w.usage)
      if (amount > 0 &&
          std::find(short_slots.begin(), short_slots.end(), slot) != short_slots.end())
        return true;
    return false;
  }
  bool QueueBorrowing(int cq) const {
    for (int slot : short_slots)
      if (ledger.Borrowing(cq, slot)) return true;
    return false;
  }
  bool UnderNominal() const {
    for (int slot : short_slots)
      if (ledger.Effective(who.cq, slot) >= ledger.Quota(who.cq, slot).nominal) return false;
    return true;
  }
  bool Fits(bool allow_borrowing) const {
    for (const SlotChoice& c : assignment.choices) {
      if (!allow_borrowing &&
          ledger.Effective(who.cq, c.slot) + c.amount > ledger.Quota(who.cq, c.slot).nominal)
        return false;
      if (c.amount > ledger.Available(who.cq, c.slot)) return false;
    }
    return true;
  }
  bool WouldBorrow() const {
    for (const SlotChoice& c : assignment.choices)
      if (ledger.Effective(who.cq, c.slot) + c.amount > ledger.Quota(who.cq, c.slot).nominal)
        return true;
    return false;
  }
  void Move(int index, int sign) {
    const AdmittedWorkload& w = (*view.admitted)[index];
    for (const auto& [slot, amount] : w.usage) ledger.AddUsed(w.cq, slot, sign * amount, true);
  }

  std::vector<int> Candidates() const;
  std::vector<PreemptionTarget> Minimal(const std::vector<int>& candidates, bool allow_borrowing,
                                        std::optional<int32_t> borrow_below);
};

std::vector<int> Search::Candidates() const {
  const ClusterQueue& spec = *(*view.specs)[who.cq];
  std::vector<int> out;
  const auto within = spec.preemption.within_cluster_queue;
  if (within != WithinClusterQueuePolicy::kNever) {
    for (int i : (*view.admitted_by_cq)[who.cq]) {
      const AdmittedWorkload& w = (*view.admitted)[i];
      if (w.victim || w.priority > who.priority) continue;
      if (w.priority == who.priority &&
          (within != WithinClusterQueuePolicy::kLowerOrNewerEqualPriority ||
           w.creation_ms <= who.creation_ms))
        continue;
      if (Uses(w)) out.push_back(i);
    }
  }
  const int cohort = ledger.CohortOf(who.cq);
  const auto reclaim = spec.preemption.reclaim_within_cohort;
  if (cohort >= 0 && reclaim != ReclaimWithinCohortPolicy::kNever) {
    for (int other : (*view.cohort_members)[cohort]) {
      if (other == who.cq || !QueueBorrowing(other)) continue;
      for (int i : (*view.admitted_by_cq)[other]) {
        const AdmittedWorkload& w = (*view.admitted)[i];
        if (w.victim) continue;
        if (reclaim == ReclaimWithinCohortPolicy::kLowerPriority && w.priority >= who.priority)
          continue;
        if (Uses(w)) out.push_back(i);
      }
    }
  }
  const auto& all = *view.admitted;
  std::sort(out.begin(), out.end(), [&](int a, int b) {
    const AdmittedWorkload& x = all[a];
    const AdmittedWorkload& y = all[b];
    const bool x_own = x.cq == who.cq, y_own = y.cq == who.cq;
    if (x_own != y_own) return !x_own;
    if (x.priority != y.priority) return x.priority < y.priority;
    if (x.admitted_ms != y.admitted_ms) return x.admitted_ms > y.admitted_ms;
    return *x.key < *y.key;
  });
  return out;
}

std::vector<PreemptionTarget> Search::Minimal(const std::vector<int>& candidates,
                                              bool allow_borrowing,
                                              std::optional<int32_t> borrow_below) {
  std::vector<int> removed;
  bool fits = false;
  for (int i : candidates) {
    const AdmittedWorkload& w = (*view.admitted)[i];
    if (w.cq != who.cq && !QueueBorrowing(w.cq)) continue;
    if (w.cq != who.cq && borrow_below && w.priority >= *borrow_below) allow_borrowing = false;
    Move(i, -1);
    removed.push_back(i);
    if (Fits(allow_borrowing)) {
      fits = true;
      break;
    }
  }
  std::vector<PreemptionTarget> targets;
  if (fits) {
    // Put back, newest removal first (the last one made it fit and stays), each victim the
    // preemptor still fits without.
    std::vector<bool> keep(removed.size(), true);
    for (int k = static_cast<int>(removed.size()) - 2; k >= 0; --k) {
      Move(removed[k], +1);
      if (Fits(allow_borrowing)) {
        keep[k] = false;
      } else {
        Move(removed[k], -1);
      }
    }
    const bool borrows = WouldBorrow();
    for (size_t k = 0; k < removed.size(); ++k) {
      if (!keep[k]) continue;
      const AdmittedWorkload& w = (*view.admitted)[removed[k]];
      const PreemptionRule rule = w.cq == who.cq ? PreemptionRule::kInClusterQueue
                                  : borrows      ? PreemptionRule::kInCohortReclaimWhileBorrowing
                                                 : PreemptionRule::kInCohortReclamation;
      targets.push_back({removed[k], rule});
    }
    for (size_t k = 0; k < removed.size(); ++k)
      if (keep[k]) Move(removed[k], +1);
  } else {
    for (int i : removed) Move(i, +1);
  }
  return targets;
}

}  // namespace

std::vector<PreemptionTarget> ChooseVictims(QuotaLedger& ledger, const PreemptionView& view,
                                            const Preemptor& who, const Assignment& assignment) {
  Search s{ledger, view, who, assignment, {}};
  for (const SlotChoice& c : assignment.choices)
    if (c.mode != FitMode::kFit) s.short_slots.push_back(c.slot);
  if (s.short_slots.empty()) return {};
  std::vector<int> candidates = s.Candidates();
  if (candidates.empty()) return {};
  std::vector<int> same_queue;
  for (int i : candidates)
    if ((*view.admitted)[i].cq == who.cq) same_queue.push_back(i);
  // Nothing to reclaim in the cohort: borrowing is allowed, as Kueue does.
  if (same_queue.size() == candidates.size()) return s.Minimal(candidates, true, std::nullopt);

  const PreemptionPolicy& policy = (*view.specs)[who.cq]->preemption;
  if (policy.borrow_within_cohort == BorrowWithinCohortPolicy::kLowerPriority) {
    int32_t threshold = who.priority;
    if (policy.max_priority_threshold && *policy.max_priority_threshold < threshold)
      threshold = *policy.max_priority_threshold + 1;
    std::vector<int> allowed = candidates;
    if (!s.UnderNominal()) {
      std::erase_if(allowed, [&](int i) {
        const AdmittedWorkload& w = (*view.admitted)[i];
        return w.cq != who.cq && w.priority >= threshold;
      });
    }
    auto targets = s.Minimal(allowed, true, threshold);
    if (!targets.empty()) return targets;
  }
  if (s.UnderNominal()) {
    auto targets = s.Minimal(candidates, false, std::nullopt);
    if (!targets.empty()) return targets;
  }
  return s.Minimal(same_queue, true, std::nullopt);
}

}  // namespace trainlet::coordinator::admission
