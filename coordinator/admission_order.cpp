#include "coordinator/admission_order.h"

#include <algorithm>
#include <cmath>

namespace trainlet::coordinator::admission {

bool SelectorMatches(const LabelSelector& selector,
                     const std::map<std::string, std::string>& labels) {
  for (const auto& [key, value] : selector.match_labels) {
    auto it = labels.find(key);
    if (it == labels.end() || it->second != value) return false;
  }
  for (const LabelRequirement& req : selector.match_expressions) {
    auto it = labels.find(req.key);
    const bool has = it != labels.end();
    const bool in =
        has && std::find(req.values.begin(), req.values.end(), it->second) != req.values.end();
    switch (req.op) {
      case LabelRequirement::Op::kIn:
        if (!in) return false;
        break;
      case LabelRequirement::Op::kNotIn:
        if (in) return false;
        break;
      case LabelRequirement::Op::kExists:
        if (!has) return false;
        break;
      case LabelRequirement::Op::kDoesNotExist:
        if (has) return false;
        break;
    }
  }
  return true;
}

bool QueueOrderLess(const Workload& a, const Workload& b) {
  if (a.priority != b.priority) return a.priority > b.priority;
  if (a.creation_ms != b.creation_ms) return a.creation_ms < b.creation_ms;
  return a.key < b.key;
}

bool HeadKeyLess(const HeadKey& a, const HeadKey& b) {
  if (a.borrowing != b.borrowing) return !a.borrowing;
  if (a.share != b.share) return a.share < b.share;
  if (a.history_share != b.history_share) return a.history_share < b.history_share;
  if (a.priority != b.priority) return a.priority > b.priority;
  if (a.creation_ms != b.creation_ms) return a.creation_ms < b.creation_ms;
  return *a.key < *b.key;
}

double DecayedUsage(double value, int64_t as_of_ms, int64_t now_ms, int64_t half_life_ms) {
  if (half_life_ms <= 0 || now_ms <= as_of_ms) return value;
  const double halves = static_cast<double>(now_ms - as_of_ms) / static_cast<double>(half_life_ms);
  return value * std::exp2(-halves);
}

std::vector<UsageHistory> AdvanceUsageHistory(
    const std::vector<UsageHistory>& history,
    const std::map<std::string, std::map<std::string, int64_t>>& current, int64_t now_ms,
    int64_t half_life_ms) {
  std::vector<UsageHistory> out;
  std::map<std::string, bool> seen;
  for (const UsageHistory& h : history) {
    UsageHistory next;
    next.cluster_queue = h.cluster_queue;
    next.as_of_ms = std::max(now_ms, h.as_of_ms);
    for (const auto& [r, v] : h.usage)
      next.usage[r] = DecayedUsage(v, h.as_of_ms, now_ms, half_life_ms);
    auto it = current.find(h.cluster_queue);
    if (it != current.end() && now_ms > h.as_of_ms) {
      const double seconds = static_cast<double>(now_ms - h.as_of_ms) / 1000.0;
      for (const auto& [r, amount] : it->second)
        next.usage[r] += static_cast<double>(amount) * seconds;
    }
    seen[h.cluster_queue] = true;
    out.push_back(std::move(next));
  }
  for (const auto& [cq, usage] : current) {
    if (seen.count(cq)) continue;
    out.push_back(UsageHistory{cq, {}, now_ms});
  }
  return out;
}

}  // namespace trainlet::coordinator::admission
