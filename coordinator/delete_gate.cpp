#include "coordinator/delete_gate.h"

#include <algorithm>

#include "coordinator/job_state_machine.h"
#include "coordinator/lifecycle_rules.h"
#include "coordinator/rank_state_machine.h"

namespace trainlet::coordinator {

bool DeleteGate::Confirmed(const std::string& node, const std::string& job,
                           uint32_t attempt) const {
  const NodeEntry* e = nodes_->Find(node);
  if (e == nullptr || e->state == NodeState::kLost) return false;
  // A node registered again after it was Lost; one that reports attempts no longer holds this
  // one unended (a registration lists ended attempts too: the next beat, a second later, does
  // not).
  return !e->reports_attempts || !e->held_attempts.contains({job, attempt});
}

DeleteGate::Decision DeleteGate::Decide(const std::string& job, const v1::JobStatus& status) const {
  Decision d;
  if (forced_.contains(job)) {
    d.finish = true;
    return d;
  }
  const auto& ranks = status.ranks();
  if (!std::all_of(ranks.begin(), ranks.end(), RankEnded)) return d;  // the usual wait
  for (const auto& r : ranks) {
    if (r.rank_state() != v1::RANK_STATE_LOST) continue;
    const uint32_t attempt = r.attempt() != 0 ? r.attempt() : status.attempt();
    if (Confirmed(r.node(), job, attempt)) continue;
    const NodeEntry* e = nodes_->Find(r.node());
    const std::string state = e == nullptr ? "not registered" : NodeStateName(e->state);
    d.waiting_for = "rank " + std::to_string(r.rank()) + " on node " + r.node() + " (" + state +
                    ") may still run: the job stays Terminating until the node confirms it "
                    "stopped, or `trainletctl delete --force`";
    return d;
  }
  d.finish = true;
  return d;
}

bool DeleteGate::NoteWaiting(v1::JobStatus& status, const std::string& waiting_for,
                             int64_t now_ms) {
  if (waiting_for.empty()) return false;
  for (int i = status.events_size() - 1; i >= 0; --i) {
    const v1::JobEvent& e = status.events(i);
    if (e.reason() != "DeleteWaitsForNode") continue;
    if (e.message() == waiting_for) return false;
    break;
  }
  AppendEvent(status, "Warning", "DeleteWaitsForNode", waiting_for, now_ms);
  return true;
}

}  // namespace trainlet::coordinator
