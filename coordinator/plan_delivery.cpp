#include "coordinator/plan_delivery.h"

#include <set>
#include <string_view>

#include "coordinator/exec_authority.h"

namespace trainlet::coordinator {

PlanDelivery::Job& PlanDelivery::Of(const std::string& job, uint32_t attempt) {
  Job& j = jobs_[job];
  if (j.attempt != attempt) j = Job{attempt, {}, {}, {}};
  return j;
}

void PlanDelivery::Sent(const std::string& node, const v1::LaunchPlan& plan, int64_t now_ms) {
  Job& j = Of(plan.job(), plan.attempt());
  j.plans[node] = plan;
  j.sent_ms[node] = now_ms;
  j.first_ms.try_emplace(node, now_ms);
}

void PlanDelivery::Tried(const std::string& job, uint32_t attempt, const std::string& node,
                         int64_t now_ms) {
  Job& j = Of(job, attempt);
  j.sent_ms[node] = now_ms;
  j.first_ms.try_emplace(node, now_ms);
}

const v1::LaunchPlan* PlanDelivery::Plan(const std::string& job, uint32_t attempt,
                                         const std::string& node) const {
  auto it = jobs_.find(job);
  if (it == jobs_.end() || it->second.attempt != attempt) return nullptr;
  auto p = it->second.plans.find(node);
  return p == it->second.plans.end() ? nullptr : &p->second;
}

int64_t PlanDelivery::SentMs(const std::string& job, uint32_t attempt,
                             const std::string& node) const {
  auto it = jobs_.find(job);
  if (it == jobs_.end() || it->second.attempt != attempt) return 0;
  auto s = it->second.sent_ms.find(node);
  return s == it->second.sent_ms.end() ? 0 : s->second;
}

bool PlanDelivery::Reached(const v1::JobStatus& st, const std::string& node,
                           const NodeRegistry& nodes) const {
  const NodeEntry* e = nodes.Find(node);
  if (e == nullptr || e->state == NodeState::kLost) return false;
  if (!e->reports_attempts) return true;  // nothing known: as before the report existed
  if (e->planned_attempts.contains({st.name(), st.attempt()})) return true;
  // A report that may have been composed before the plan arrived says nothing. Of a plan this
  // coordinator never sent (it restarted since), any report it received says it.
  // A copy sent again later may be on its way; the first one had its time to arrive.
  auto it = jobs_.find(st.name());
  if (it == jobs_.end() || it->second.attempt != st.attempt()) return false;
  auto first = it->second.first_ms.find(node);
  return first != it->second.first_ms.end() &&
         e->attempts_reported_unix_ms < first->second + kAckWaitMs;
}

bool PlanDelivery::AskLost(const v1::JobStatus& st, const std::string& node,
                           const NodeRegistry& nodes, int64_t now_ms) const {
  const NodeEntry* e = nodes.Find(node);
  if (e == nullptr || e->state != NodeState::kReady || !e->reports_attempts) return false;
  if (e->held_attempts.contains({st.name(), st.attempt()})) return false;
  const int64_t asked = SentMs(st.name(), st.attempt(), node);
  return asked != 0 && e->attempts_reported_unix_ms >= asked + kAckWaitMs &&
         now_ms >= asked + kResendIntervalMs;
}

std::vector<std::string> PlanDelivery::Missing(const v1::JobStatus& st, const NodeRegistry& nodes,
                                               int64_t now_ms) const {
  std::vector<std::string> out;
  if (!AttemptActive(st, st.attempt())) return out;
  // A node with a rank of the attempt that started or ended got its plan, whatever its report
  // says: one pass over the ranks, not one per node (this runs for every live job on every
  // Schedule pass).
  std::set<std::string_view> heard;
  for (const auto& r : st.ranks()) {
    if (r.rank_state() != v1::RANK_STATE_PENDING) heard.insert(r.node());
  }
  for (const std::string& node : st.placement()) {
    const NodeEntry* e = nodes.Find(node);
    if (e == nullptr || e->state != NodeState::kReady || !e->reports_attempts) continue;
    if (heard.contains(node) || Reached(st, node, nodes)) continue;
    const int64_t sent = SentMs(st.name(), st.attempt(), node);
    if (sent != 0 && now_ms < sent + kResendIntervalMs) continue;
    out.push_back(node);
  }
  return out;
}

}  // namespace trainlet::coordinator
