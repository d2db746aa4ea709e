// Quota accounting for admission: per ClusterQueue and per cohort, per (flavor, resource) slot.
//
// Kueue's v1beta1 arithmetic, on dense arrays so one admission pass over thousands of workloads
// stays cheap. For one slot of ClusterQueue c with nominal N, borrowingLimit B, lendingLimit L:
//   guaranteed(c) = N - L when L is set, else 0      (kept for c, never lent)
//   lendable(c)   = L when L is set, else N          (put into the cohort)
// The cohort holds the sum of its members' lendable quota, and its usage is the sum of what each
// member uses beyond its guaranteed part. What c may still take:
//   no cohort:  N - used(c)
//   in cohort:  max(0, guaranteed - used) + min(cohort lendable - cohort usage,
//                                                lendable(c) - max(0, used - guaranteed) + B)
// (the second term of the min only when B is set). So c never goes over N + B, and the cohort
// never lends more than its members put in.
//
// No sum overflows: N, B and L count at most kUnlimited (a larger quota, up to the 2^62 units a
// quantity may hold, is as good as unlimited), and a cohort's lendable quota is summed exactly
// and counts at most kUnlimited, however many members put in how much.
//
// Usage comes in two kinds during a pass: what admitted workloads hold (`used`, what the quota
// check is about) and, for a workload that preempted others, what it will hold once they stop.
// Until then a slot counts used + max(0, reserved - releasing): the room being freed is held for
// the preemptor, and nobody can be admitted into room that is not free yet.
//
// Not thread-safe; owned by one admission pass.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"

namespace trainlet::coordinator::admission {

inline constexpr int64_t kUnlimited = std::numeric_limits<int64_t>::max() / 4;

struct SlotQuota {
  bool defined = false;  // this ClusterQueue has quota for this flavor and resource
  int64_t nominal = 0;
  int64_t borrowing_limit = kUnlimited;
  int64_t guaranteed = 0;
  int64_t lendable = 0;
};

// Builds a SlotQuota from a ResourceQuota's three numbers; lending_limit < 0 means unset, and
// so does borrowing_limit < 0. A lending limit above nominal lends all of nominal.
SlotQuota MakeSlotQuota(int64_t nominal, int64_t borrowing_limit, int64_t lending_limit);

class QuotaLedger {
 public:
  // slots: how many (flavor, resource) pairs exist; every queue has one cell per slot.
  explicit QuotaLedger(int slots) : slots_(slots) {}

  // ---- Building (before any usage is added) ----
  int AddCohort();
  // cohort: an AddCohort() index, or -1 for none.
  int AddClusterQueue(int cohort);
  void SetQuota(int cq, int slot, const SlotQuota& quota);

  // ---- Usage ----
  // `trial`: a what-if change the caller undoes before anyone else looks (a preemption
  // simulation); it leaves Version() alone so cached answers stay valid.
  void AddUsed(int cq, int slot, int64_t amount, bool trial = false);  // negative to remove
  void AddReserved(int cq, int slot, int64_t amount);
  void AddReleasing(int cq, int slot, int64_t amount);

  // ---- Questions ----
  const SlotQuota& Quota(int cq, int slot) const { return cells_[Cell(cq, slot)].quota; }
  int64_t Used(int cq, int slot) const { return cells_[Cell(cq, slot)].used; }
  // What counts against quota now: used plus room held for preemptors.
  int64_t Effective(int cq, int slot) const;
  // How much more may be admitted into this slot now (negative when over quota).
  int64_t Available(int cq, int slot) const;
  // The most this slot could ever give, with the queue and the cohort empty.
  int64_t Potential(int cq, int slot) const;
  bool Borrowing(int cq, int slot) const;  // effective usage above nominal
  int CohortOf(int cq) const { return cohort_of_[cq]; }
  // Bumped on every usage change of the queue's cohort (of the queue itself when it has none):
  // an answer computed at one version stays right while the version is the same.
  uint64_t Version(int cq) const;
  int64_t CohortLendable(int cohort, int slot) const;
  int slots() const { return slots_; }
  int cluster_queues() const { return static_cast<int>(cohort_of_.size()); }

  // Kueue's dominant resource share of `cq` were `extra` (slot, amount pairs) added: the largest,
  // over resources, of (usage above nominal) * 1000 / (cohort's lendable quota of that
  // resource), divided by weight. `resource_of_slot` maps a slot to its resource index. 0 when
  // the queue borrows nothing or has no cohort.
  double DominantShare(int cq, std::span<const std::pair<int, int64_t>> extra,
                       const std::vector<int>& resource_of_slot, double weight) const;

  // Whether `used` (admitted workloads only) is within every quota: each queue at most nominal
  // (no cohort) or nominal + borrowingLimit, and each cohort lending at most what it holds.
  // The error names the queue or cohort and the slot, using `slot_name` and `cq_name`.
  Status UsedWithinQuota(const std::vector<std::string>& cq_name,
                         const std::vector<std::string>& slot_name) const;

 private:
  struct CellState {
    SlotQuota quota;
    int64_t used = 0, reserved = 0, releasing = 0;
  };
  size_t Cell(int cq, int slot) const { return static_cast<size_t>(cq) * slots_ + slot; }
  // Moves the cohort's usage by the change of the cell's part above guaranteed.
  void Change(int cq, int slot, int64_t CellState::*field, int64_t amount, bool trial);

  int slots_;
  std::vector<CellState> cells_;  // cq-major
  std::vector<int> cohort_of_;
  std::vector<uint64_t> queue_version_;
  struct CohortState {
    std::vector<int64_t> lendable, borrowed;  // per slot; borrowed: sum of usage above guaranteed
    std::vector<__int128> lendable_sum;       // per slot: the exact sum; lendable is it capped
    uint64_t version = 0;
  };
  std::vector<CohortState> cohorts_;
};

// Inline: called for every resource of every flavor tried, thousands of times a pass.
inline int64_t QuotaLedger::Effective(int cq, int slot) const {
  const CellState& c = cells_[Cell(cq, slot)];
  return c.used + std::max<int64_t>(0, c.reserved - c.releasing);
}

inline int64_t QuotaLedger::Available(int cq, int slot) const {
  const SlotQuota& q = Quota(cq, slot);
  if (!q.defined) return 0;
  const int64_t used = Effective(cq, slot);
  const int cohort = cohort_of_[cq];
  if (cohort < 0) return q.nominal - used;
  const int64_t local = std::max<int64_t>(0, q.guaranteed - used);
  int64_t parent = cohorts_[cohort].lendable[slot] - cohorts_[cohort].borrowed[slot];
  if (q.borrowing_limit != kUnlimited) {
    const int64_t used_in_parent = std::max<int64_t>(0, used - q.guaranteed);
    parent = std::min(parent, q.lendable - used_in_parent + q.borrowing_limit);
  }
  return local + parent;
}

inline int64_t QuotaLedger::Potential(int cq, int slot) const {
  const SlotQuota& q = Quota(cq, slot);
  if (!q.defined) return 0;
  const int cohort = cohort_of_[cq];
  if (cohort < 0) return q.nominal;
  int64_t parent = cohorts_[cohort].lendable[slot];
  if (q.borrowing_limit != kUnlimited) parent = std::min(parent, q.lendable + q.borrowing_limit);
  return q.guaranteed + parent;
}

}  // namespace trainlet::coordinator::admission
