// JobController's reserve-then-launch step and the start timeout. Split from job_controller.cpp
// by responsibility; same class, same loop.
//
// A runtime that needs ports on a node (NodeLayout::ports > 0) gets them from that node's agent
// before its plans are made: TryPlace lays the attempt out (LayoutAttempt: the plugin's Layout,
// without ports), stores the attempt, and PortReservationWaits sends ReservePorts, keeping the
// request and the layout. The job stays Starting with its ranks Pending until every node has
// answered; then LaunchWithPorts renders the plans with the reserved ports (RenderAttempt: the
// plugin's Render) and they go out. Jobs whose runtime needs no ports skip all of this: TryPlace
// renders them at once.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <climits>

#include "coordinator/attempt_plan.h"
#include "coordinator/job_controller.h"
#include "coordinator/job_state_machine.h"
#include "coordinator/rank_state_machine.h"

namespace trainlet::coordinator {

void JobController::OnPortsReserved(const std::string& node, const v1::PortsReserved& reserved,
                                    int64_t now_ms) {
  std::string why;
  switch (port_waits_.Record(node, reserved, &why)) {
    case PortReservationWaits::Outcome::kDropped:
    case PortReservationWaits::Outcome::kWaiting:
      return;
    case PortReservationWaits::Outcome::kRefused:
      FailAttempt(*jobs_.at(reserved.job()), why, now_ms);
      return;
    case PortReservationWaits::Outcome::kComplete:
      LaunchWithPorts(*jobs_.at(reserved.job()), now_ms);
      return;
  }
}

void JobController::LaunchWithPorts(Job& job, int64_t now_ms) {
  const std::string& name = job.record.name;
  const uint32_t attempt = job.record.status.attempt();
  const PlanRequest* waited = port_waits_.Request(name, attempt);
  const AttemptLayout* layout = port_waits_.Layout(name, attempt);
  TRAINLET_CHECK(waited != nullptr && layout != nullptr);
  const PlanRequest& req = *waited;
  // RenderAttempt checks that the plans hold exactly the ranks stored from the layout.
  auto plans = RenderAttempt(*job.plugin, req, *layout, exec_.SecretOf(name));
  if (!plans.ok()) {
    FailAttempt(job, "planning with the reserved ports failed: " + plans.status().message(),
                now_ms);
    return;
  }
  std::vector<std::string> nodes;
  for (const auto& n : req.nodes) nodes.push_back(n.name);
  port_waits_.End(name, attempt);  // `req` and `layout` go with it
  spdlog::info("trainjob/{}: ports reserved, sending the plans of attempt {}", name, attempt);
  for (size_t i = 0; i < plans->size(); ++i) agents_.LaunchPlan(nodes[i], std::move((*plans)[i]));
}

void JobController::EndPortWait(Job& job) {
  v1::JobStatus& st = job.record.status;
  if (!port_waits_.End(job.record.name, st.attempt())) return;
  for (auto& r : *st.mutable_ranks()) {
    if (r.rank_state() != v1::RANK_STATE_PENDING) continue;
    TRAINLET_CHECK(ApplyRankTrigger(r, RankTrigger::kAttemptStopped).ok());
    r.set_message("never started: the attempt ended while its nodes reserved ports");
  }
  MarkDirty(job);
}

void JobController::EnforceStartTimeouts(int64_t now_ms) {
  for (const auto& name : std::vector<std::string>(order_)) {
    auto it = jobs_.find(name);
    if (it == jobs_.end()) continue;
    Job& job = *it->second;
    if (now_ms < StartDeadlineMs(job.record.status, options_.start_timeout)) continue;
    v1::JobStatus& st = job.record.status;
    // The nodes at fault, in placement order: while ports are awaited no plan has gone out, so
    // only the nodes that did not answer are; after that, those with ranks that never reported.
    std::string silent;
    if (port_waits_.Request(name, st.attempt()) != nullptr) {
      for (const std::string& node : port_waits_.Unanswered(name, st.attempt())) {
        silent += (silent.empty() ? "" : ", ") + node + " (its ports never arrived)";
      }
    } else {
      for (const std::string& node : st.placement()) {
        const bool pending = std::any_of(st.ranks().begin(), st.ranks().end(), [&](const auto& r) {
          return r.node() == node && r.rank_state() == v1::RANK_STATE_PENDING;
        });
        if (pending) silent += (silent.empty() ? "" : ", ") + node + " (no rank reported started)";
      }
    }
    FailAttempt(job,
                "StartTimeout: ranks not started " +
                    std::to_string(options_.start_timeout.count()) +
                    " ms after the attempt was placed, on " + silent,
                now_ms);
    // Ranks that never reported are given up, like a lost node's, so the restart does not wait
    // for events that may never come; the StopWorkers FailAttempt sent ends any that do exist.
    for (auto& r : *st.mutable_ranks()) {
      if (r.rank_state() != v1::RANK_STATE_PENDING) continue;
      TRAINLET_CHECK(ApplyRankTrigger(r, RankTrigger::kNodeLost).ok());
      r.set_message("never reported started within the start timeout");
    }
    MarkDirty(job);
  }
}

}  // namespace trainlet::coordinator
