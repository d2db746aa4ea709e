// Who goes first: a ClusterQueue's order of its pending workloads, the order in which the heads
// of several ClusterQueues take free quota (fair sharing included), decayed usage history, and
// which namespaces a ClusterQueue admits from. Pure functions, safe from any thread.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "coordinator/admission_types.h"

namespace trainlet::coordinator::admission {

// Kubernetes' LabelSelector semantics: every match_labels pair and every expression holds.
bool SelectorMatches(const LabelSelector& selector,
                     const std::map<std::string, std::string>& labels);

// A ClusterQueue's queue order: higher priority first, then older (creation_ms), then key.
bool QueueOrderLess(const Workload& a, const Workload& b);

// The order in which the heads of ClusterQueues are served in one pass, as Kueue's scheduler
// orders its entries: one that fits within nominal quota before one that borrows; with fair
// sharing, the lower weighted dominant share (counting the head itself) first, then the lower
// weighted share of decayed recent usage ("who used less recently"); then priority, age, key.
struct HeadKey {
  bool borrowing = false;
  double share = 0;          // 0 without fair sharing
  double history_share = 0;  // 0 without fair sharing or history
  int32_t priority = 0;
  int64_t creation_ms = 0;
  const std::string* key = nullptr;
};
bool HeadKeyLess(const HeadKey& a, const HeadKey& b);

// `value` decayed from as_of_ms to now_ms with a half-life: value * 2^-(elapsed / half_life).
// No decay when half_life_ms <= 0 or now is not after as_of.
double DecayedUsage(double value, int64_t as_of_ms, int64_t now_ms, int64_t half_life_ms);

// The history after `now_ms`: each entry decayed to now, plus what each ClusterQueue holds now
// (`current`, ClusterQueue -> resource -> amount) times the seconds since the entry's as_of.
// The caller keeps the result (it survives restarts with the queues) and passes it to the next
// admission pass. ClusterQueues new to the history start at now with nothing.
std::vector<UsageHistory> AdvanceUsageHistory(
    const std::vector<UsageHistory>& history,
    const std::map<std::string, std::map<std::string, int64_t>>& current, int64_t now_ms,
    int64_t half_life_ms);

}  // namespace trainlet::coordinator::admission
