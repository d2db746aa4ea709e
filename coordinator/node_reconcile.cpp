#include "coordinator/node_reconcile.h"

#include <algorithm>

namespace trainlet::coordinator {

NodeReconcile ReconcileRunning(const std::string& node,
                               const google::protobuf::RepeatedPtrField<v1::RunningWorker>& running,
                               const LiveAttemptLookup& live) {
  NodeReconcile out;
  for (const auto& w : running) {
    const v1::JobStatus* st = live(w.job(), w.attempt());
    if (st == nullptr) {
      out.stop.insert({w.job(), w.attempt()});
      continue;
    }
    for (int i = 0; i < st->ranks_size(); ++i) {
      const v1::RankStatus& r = st->ranks(i);
      if (r.rank() != w.rank() || r.node() != node || r.rank_state() != v1::RANK_STATE_PENDING) {
        continue;
      }
      // A rank reported twice is adopted once: the first report moves it past Pending.
      const bool seen = std::any_of(out.adopt.begin(), out.adopt.end(), [&](const auto& a) {
        return a.job == w.job() && a.rank_index == i;
      });
      if (!seen) out.adopt.push_back({w.job(), i, w.pid()});
    }
  }
  return out;
}

}  // namespace trainlet::coordinator
