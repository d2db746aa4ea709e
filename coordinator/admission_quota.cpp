#include "coordinator/admission_quota.h"

#include <algorithm>

namespace trainlet::coordinator::admission {

SlotQuota MakeSlotQuota(int64_t nominal, int64_t borrowing_limit, int64_t lending_limit) {
  SlotQuota q;
  q.defined = true;
  q.nominal = std::clamp<int64_t>(nominal, 0, kUnlimited);
  q.borrowing_limit = borrowing_limit < 0 ? kUnlimited : std::min(borrowing_limit, kUnlimited);
  if (lending_limit < 0 || lending_limit >= q.nominal) {
    q.guaranteed = 0;
    q.lendable = q.nominal;
  } else {
    q.guaranteed = q.nominal - lending_limit;
    q.lendable = lending_limit;
  }
  return q;
}

int QuotaLedger::AddCohort() {
  CohortState c;
  c.lendable.assign(slots_, 0);
  c.borrowed.assign(slots_, 0);
  c.lendable_sum.assign(slots_, 0);
  cohorts_.push_back(std::move(c));
  return static_cast<int>(cohorts_.size()) - 1;
}

int QuotaLedger::AddClusterQueue(int cohort) {
  cohort_of_.push_back(cohort);
  queue_version_.push_back(0);
  cells_.resize(cells_.size() + slots_);
  return static_cast<int>(cohort_of_.size()) - 1;
}

void QuotaLedger::SetQuota(int cq, int slot, const SlotQuota& quota) {
  CellState& cell = cells_[Cell(cq, slot)];
  TRAINLET_CHECK(cell.used == 0 && cell.reserved == 0);
  const int cohort = cohort_of_[cq];
  if (cohort < 0) {
    cell.quota = quota;
    return;
  }
  CohortState& c = cohorts_[cohort];
  if (cell.quota.defined) c.lendable_sum[slot] -= cell.quota.lendable;
  cell.quota = quota;
  if (quota.defined) c.lendable_sum[slot] += quota.lendable;
  c.lendable[slot] = static_cast<int64_t>(std::min<__int128>(c.lendable_sum[slot], kUnlimited));
}

void QuotaLedger::Change(int cq, int slot, int64_t CellState::*field, int64_t amount, bool trial) {
  CellState& cell = cells_[Cell(cq, slot)];
  const int64_t before = std::max<int64_t>(0, Effective(cq, slot) - cell.quota.guaranteed);
  cell.*field += amount;
  const int64_t after = std::max<int64_t>(0, Effective(cq, slot) - cell.quota.guaranteed);
  const int cohort = cohort_of_[cq];
  if (cohort >= 0) {
    cohorts_[cohort].borrowed[slot] += after - before;
    if (!trial) ++cohorts_[cohort].version;
  } else if (!trial) {
    ++queue_version_[cq];
  }
}

void QuotaLedger::AddUsed(int cq, int slot, int64_t amount, bool trial) {
  Change(cq, slot, &CellState::used, amount, trial);
}
void QuotaLedger::AddReserved(int cq, int slot, int64_t amount) {
  Change(cq, slot, &CellState::reserved, amount, false);
}
void QuotaLedger::AddReleasing(int cq, int slot, int64_t amount) {
  Change(cq, slot, &CellState::releasing, amount, false);
}

bool QuotaLedger::Borrowing(int cq, int slot) const {
  const SlotQuota& q = Quota(cq, slot);
  return q.defined && Effective(cq, slot) > q.nominal;
}

uint64_t QuotaLedger::Version(int cq) const {
  const int cohort = cohort_of_[cq];
  // Distinct ranges: a queue's own counter never equals its cohort's by accident of reuse,
  // because a queue uses exactly one of the two for its whole life.
  return cohort >= 0 ? cohorts_[cohort].version : queue_version_[cq];
}

int64_t QuotaLedger::CohortLendable(int cohort, int slot) const {
  return cohorts_[cohort].lendable[slot];
}

double QuotaLedger::DominantShare(int cq, std::span<const std::pair<int, int64_t>> extra,
                                  const std::vector<int>& resource_of_slot, double weight) const {
  const int cohort = cohort_of_[cq];
  if (cohort < 0) return 0;
  // Per resource (summed over flavors): what the queue uses above nominal, and what the cohort
  // can lend. A handful of resources: a small flat list on the stack, no allocation.
  struct PerResource {
    int resource;
    int64_t borrowed;
    double lendable;  // over up to 16 flavors of kUnlimited each: more than an int64 holds
  };
  constexpr int kInline = 16;
  PerResource inline_entries[kInline];
  std::vector<PerResource> spill;
  int count = 0;
  auto entry = [&](int r) -> PerResource& {
    for (int i = 0; i < count; ++i) {
      PerResource& e = i < kInline ? inline_entries[i] : spill[i - kInline];
      if (e.resource == r) return e;
    }
    if (count < kInline) {
      inline_entries[count++] = {r, 0, 0};
      return inline_entries[count - 1];
    }
    spill.push_back({r, 0, 0});
    ++count;
    return spill.back();
  };
  for (int slot = 0; slot < slots_; ++slot) {
    const SlotQuota& q = Quota(cq, slot);
    if (!q.defined) continue;
    int64_t used = Effective(cq, slot);
    for (const auto& [s, amount] : extra)
      if (s == slot) used += amount;
    PerResource& e = entry(resource_of_slot[slot]);
    if (used > q.nominal) e.borrowed += used - q.nominal;
    e.lendable += cohorts_[cohort].lendable[slot];
  }
  double share = 0;
  for (int i = 0; i < count; ++i) {
    const PerResource& e = i < kInline ? inline_entries[i] : spill[i - kInline];
    if (e.borrowed <= 0 || e.lendable <= 0) continue;
    share =
        std::max(share, static_cast<double>(e.borrowed) * 1000.0 / static_cast<double>(e.lendable));
  }
  if (share == 0) return 0;
  if (weight <= 0) return std::numeric_limits<double>::infinity();
  return share / weight;
}

Status QuotaLedger::UsedWithinQuota(const std::vector<std::string>& cq_name,
                                    const std::vector<std::string>& slot_name) const {
  std::vector<std::vector<int64_t>> cohort_borrowed(cohorts_.size(),
                                                    std::vector<int64_t>(slots_, 0));
  for (int cq = 0; cq < cluster_queues(); ++cq) {
    const int cohort = cohort_of_[cq];
    for (int slot = 0; slot < slots_; ++slot) {
      const CellState& c = cells_[Cell(cq, slot)];
      if (c.used == 0) continue;
      const int64_t limit = !c.quota.defined ? 0
                            : cohort < 0     ? c.quota.nominal
                                             : (c.quota.borrowing_limit == kUnlimited
                                                    ? kUnlimited
                                                    : c.quota.nominal + c.quota.borrowing_limit);
      if (c.used > limit) {
        return InternalError("ClusterQueue " + cq_name[cq] + " uses " + std::to_string(c.used) +
                             " of " + slot_name[slot] + ", over its limit " +
                             std::to_string(limit));
      }
      if (cohort >= 0)
        cohort_borrowed[cohort][slot] += std::max<int64_t>(0, c.used - c.quota.guaranteed);
    }
  }
  for (size_t cohort = 0; cohort < cohorts_.size(); ++cohort) {
    for (int slot = 0; slot < slots_; ++slot) {
      if (cohort_borrowed[cohort][slot] > cohorts_[cohort].lendable[slot]) {
        return InternalError("a cohort lends " + std::to_string(cohort_borrowed[cohort][slot]) +
                             " of " + slot_name[slot] + " but holds only " +
                             std::to_string(cohorts_[cohort].lendable[slot]));
      }
    }
  }
  return Status::Ok();
}

}  // namespace trainlet::coordinator::admission
