#include "coordinator/admission_preemption.h"

#include <algorithm>
#include <optional>
#include <span>

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

  double Share(int cq, std::span<const std::pair<int, int64_t>> extra) const {
    return ledger.DominantShare(cq, extra, *view.resource_of_slot, (*view.specs)[cq]->fair_weight);
  }
  double ShareWithout(const AdmittedWorkload& w) const {
    std::vector<std::pair<int, int64_t>> minus;
    for (const auto& [slot, amount] : w.usage) minus.push_back({slot, -amount});
    return Share(w.cq, minus);
  }

  std::vector<int> Candidates() const;
  std::vector<PreemptionTarget> Minimal(const std::vector<int>& candidates, bool allow_borrowing,
                                        std::optional<int32_t> borrow_below);
  std::vector<PreemptionTarget> Fair(const std::vector<int>& candidates,
                                     std::optional<int32_t> borrow_below);
  bool FairFinalShare(const std::vector<int>& candidates, std::optional<int32_t> borrow_below,
                      std::vector<int>& removed, std::vector<PreemptionRule>& rules,
                      std::vector<int>& retry);
  bool FairInitialShare(const std::vector<int>& retry, std::vector<int>& removed,
                        std::vector<PreemptionRule>& rules);
  std::vector<PreemptionTarget> Finish(const std::vector<int>& removed,
                                       const std::vector<PreemptionRule>& rules,
                                       bool allow_borrowing);
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
  if (!fits) {
    for (int i : removed) Move(i, +1);
    return {};
  }
  return Finish(removed, {}, allow_borrowing);
}

// With `removed` taken out and the preemptor fitting: puts back, newest removal first (the last
// one made it fit and stays), each victim the preemptor still fits without; names each kept
// victim's rule (`rules`, or from where it runs when empty); restores the ledger.
std::vector<PreemptionTarget> Search::Finish(const std::vector<int>& removed,
                                             const std::vector<PreemptionRule>& rules,
                                             bool allow_borrowing) {
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
  std::vector<PreemptionTarget> targets;
  for (size_t k = 0; k < removed.size(); ++k) {
    if (!keep[k]) continue;
    const AdmittedWorkload& w = (*view.admitted)[removed[k]];
    PreemptionRule rule = w.cq == who.cq ? PreemptionRule::kInClusterQueue
                          : borrows      ? PreemptionRule::kInCohortReclaimWhileBorrowing
                                         : PreemptionRule::kInCohortReclamation;
    if (!rules.empty()) rule = rules[k];
    targets.push_back({removed[k], rule});
  }
  for (size_t k = 0; k < removed.size(); ++k)
    if (keep[k]) Move(removed[k], +1);
  return targets;
}

// Candidates grouped by ClusterQueue, in candidate order, with the queue's current share.
struct QueueCandidates {
  int cq = 0;
  double share = 0;
  std::vector<int> workloads;
  size_t next = 0;
  bool queued = true;
};

std::vector<QueueCandidates> GroupByQueue(const Search& s, const std::vector<int>& candidates) {
  std::vector<QueueCandidates> groups;
  for (int i : candidates) {
    const int cq = (*s.view.admitted)[i].cq;
    auto it = std::find_if(groups.begin(), groups.end(),
                           [&](const QueueCandidates& g) { return g.cq == cq; });
    if (it == groups.end()) {
      groups.push_back({cq, s.Share(cq, {}), {}, 0, true});
      it = groups.end() - 1;
    }
    it->workloads.push_back(i);
  }
  return groups;
}

// The queued group with the highest share (the first such on ties), or null.
QueueCandidates* Highest(std::vector<QueueCandidates>& groups) {
  QueueCandidates* best = nullptr;
  for (QueueCandidates& g : groups)
    if (g.queued && g.next < g.workloads.size() && (!best || g.share > best->share)) best = &g;
  return best;
}

// Kueue's LessThanOrEqualToFinalShare: from the queue with the highest share, a workload goes
// when the preemptor's share with its request stays at or below that queue's share without
// the workload (or, with borrowWithinCohort, when it is below the threshold priority); the
// preemptor's own queue gives up its workloads in order. True when the preemptor then fits.
bool Search::FairFinalShare(const std::vector<int>& candidates, std::optional<int32_t> borrow_below,
                            std::vector<int>& removed, std::vector<PreemptionRule>& rules,
                            std::vector<int>& retry) {
  std::vector<std::pair<int, int64_t>> request;
  for (const SlotChoice& c : assignment.choices) request.push_back({c.slot, c.amount});
  double preemptor_share = Share(who.cq, request);
  std::vector<QueueCandidates> groups = GroupByQueue(*this, candidates);
  for (QueueCandidates* g = Highest(groups); g; g = Highest(groups)) {
    g->queued = false;
    if (g->cq == who.cq) {
      const int i = g->workloads[g->next++];
      Move(i, -1);
      removed.push_back(i);
      rules.push_back(PreemptionRule::kInClusterQueue);
      if (Fits(true)) return true;
      preemptor_share = Share(who.cq, request);
      g->share = Share(g->cq, {});
      g->queued = true;
      continue;
    }
    for (size_t k = g->next; k < g->workloads.size(); ++k) {
      const int i = g->workloads[k];
      const AdmittedWorkload& w = (*view.admitted)[i];
      const bool below = borrow_below && w.priority < *borrow_below;
      const double after = ShareWithout(w);
      if (!below && preemptor_share > after) {
        retry.push_back(i);
        continue;
      }
      Move(i, -1);
      removed.push_back(i);
      rules.push_back(below ? PreemptionRule::kInCohortReclaimWhileBorrowing
                            : PreemptionRule::kInCohortFairSharing);
      if (Fits(true)) return true;
      g->next = k + 1;
      g->share = after;
      g->queued = QueueBorrowing(g->cq);
      break;  // the shares moved: pick the queue again
    }
  }
  return false;
}

// Kueue's LessThanInitialShare, for what the first strategy left: one workload from each queue
// whose share is above the preemptor's share with its request, highest share first.
bool Search::FairInitialShare(const std::vector<int>& retry, std::vector<int>& removed,
                              std::vector<PreemptionRule>& rules) {
  std::vector<std::pair<int, int64_t>> request;
  for (const SlotChoice& c : assignment.choices) request.push_back({c.slot, c.amount});
  const double preemptor_share = Share(who.cq, request);
  std::vector<QueueCandidates> groups = GroupByQueue(*this, retry);
  for (QueueCandidates* g = Highest(groups); g; g = Highest(groups)) {
    g->queued = false;
    if (!(preemptor_share < g->share)) continue;
    const int i = g->workloads[g->next];
    Move(i, -1);
    removed.push_back(i);
    rules.push_back(PreemptionRule::kInCohortFairSharing);
    if (Fits(true)) return true;
  }
  return false;
}

std::vector<PreemptionTarget> Search::Fair(const std::vector<int>& candidates,
                                           std::optional<int32_t> borrow_below) {
  std::vector<int> removed, retry;
  std::vector<PreemptionRule> rules;
  if (FairFinalShare(candidates, borrow_below, removed, rules, retry) ||
      FairInitialShare(retry, removed, rules))
    return Finish(removed, rules, true);
  for (int i : removed) Move(i, +1);
  return {};
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
  const bool borrow_within =
      policy.borrow_within_cohort == BorrowWithinCohortPolicy::kLowerPriority;
  int32_t threshold = who.priority;
  if (policy.max_priority_threshold && *policy.max_priority_threshold < threshold)
    threshold = *policy.max_priority_threshold + 1;
  if (view.fair_sharing)
    return s.Fair(candidates, borrow_within ? std::optional<int32_t>(threshold) : std::nullopt);
  if (borrow_within) {
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
