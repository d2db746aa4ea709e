// JobController's two runtime-plugin passes, reserve-then-launch, and the start timeout. Split
// from job_controller.cpp by responsibility; same class, same loop.
//
// A runtime that needs ports on a node (RuntimePlugin::PortsPerNode > 0) gets them from that
// node's agent before its plans are made: TryPlace lays the attempt out (LayOut: the plugin's
// first pass, with stand-in ports; those plans are never sent), stores the attempt, and
// PortReservationWaits sends ReservePorts. The job stays Starting with its ranks Pending until
// every node has answered; then RenderWithPorts (the plugin's second pass) makes the plans with
// the reserved ports and they go out. Jobs whose runtime needs no ports skip all of this.
//
// The plugin is called only in LayOut and RenderWithPorts.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <climits>

#include "coordinator/job_controller.h"
#include "coordinator/job_state_machine.h"
#include "coordinator/rank_state_machine.h"

namespace trainlet::coordinator {

void ApplyBindingAnnotation(const std::map<std::string, std::string>& annotations,
                            std::vector<v1::LaunchPlan>& plans) {
  if (auto b = annotations.find("trainlet.io/binding"); b != annotations.end()) {
    for (auto& plan : plans) plan.set_binding(b->second);  // "none": agents bind nothing
  }
}

Result<JobController::AttemptLayout> JobController::LayOut(const Job& job,
                                                           const PlanRequest& request) const {
  AttemptLayout layout;
  PlanRequest with_stand_ins = request;
  for (uint32_t i = 0; i < request.nodes.size(); ++i) {
    const uint32_t n = job.plugin->PortsPerNode(request, i);
    layout.ports_per_node.push_back(n);
    for (uint32_t p = 1; p <= n; ++p) with_stand_ins.nodes[i].ports.push_back(p);
  }
  TRAINLET_ASSIGN_OR_RETURN(layout.plans, job.plugin->Plan(with_stand_ins));
  return layout;
}

Result<std::vector<v1::LaunchPlan>> JobController::RenderWithPorts(
    const Job& job, const PlanRequest& request) const {
  return job.plugin->Plan(request);
}

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
  const PlanRequest* waited = port_waits_.Request(job.record.name, job.record.status.attempt());
  TRAINLET_CHECK(waited != nullptr);
  const PlanRequest& req = *waited;
  auto plans = RenderWithPorts(job, req);
  if (plans.ok() && plans->size() != req.nodes.size()) {
    plans = InternalError("the plugin made " + std::to_string(plans->size()) + " plans for " +
                          std::to_string(req.nodes.size()) + " nodes");
  }
  if (plans.ok()) {
    // The ranks were stored from the first plan; the second must lay them out the same way.
    for (size_t i = 0; i < plans->size() && plans.ok(); ++i) {
      for (const auto& w : (*plans)[i].workers()) {
        bool placed = false;
        for (const auto& r : job.record.status.ranks()) {
          placed = placed || (r.rank() == w.rank() && r.node() == req.nodes[i].name);
        }
        if (!placed) {
          plans = InternalError("with ports, rank " + std::to_string(w.rank()) + " moved to node " +
                                req.nodes[i].name);
          break;
        }
      }
    }
  }
  if (!plans.ok()) {
    FailAttempt(job, "planning with the reserved ports failed: " + plans.status().message(),
                now_ms);
    return;
  }
  ApplyBindingAnnotation(job.spec.annotations, *plans);
  std::vector<std::string> nodes;
  for (const auto& n : req.nodes) nodes.push_back(n.name);
  port_waits_.End(job.record.name, job.record.status.attempt());
  spdlog::info("trainjob/{}: ports reserved, sending the plans of attempt {}", job.record.name,
               job.record.status.attempt());
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
