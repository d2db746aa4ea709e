// JobController's reserve-then-launch step and the start timeout. Split from job_controller.cpp
// by responsibility; same class, same loop.
//
// A runtime that needs ports on a node (RuntimePlugin::PortsPerNode > 0) gets them from that
// node's agent before its plans are made: TryPlace plans once with stand-in ports (checking the
// request and laying out the ranks; those plans are never sent), stores the attempt, and
// RequestPorts sends ReservePorts.
// The job stays Starting with its ranks Pending until every node has answered; then Plan() runs
// again with PlacedNode::ports filled and the plans go out. Jobs whose runtime needs no ports
// skip all of this and launch exactly as before.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <climits>

#include "coordinator/job_controller.h"
#include "coordinator/job_state_machine.h"
#include "coordinator/rank_state_machine.h"

namespace trainlet::coordinator {

bool JobController::FillStandInPorts(const Job& job, PlanRequest& request) const {
  bool any = false;
  for (uint32_t i = 0; i < request.nodes.size(); ++i) {
    const uint32_t n = job.plugin->PortsPerNode(request, i);
    for (uint32_t p = 1; p <= n; ++p) request.nodes[i].ports.push_back(p);
    any = any || n > 0;
  }
  return any;
}

bool JobController::RequestPorts(Job& job, const PlanRequest& request) {
  job.port_wait.reset();  // whatever an earlier attempt waited for is moot now
  PortWait wait;
  wait.attempt = request.attempt;
  wait.request = request;
  bool any = false;
  for (uint32_t i = 0; i < request.nodes.size(); ++i) {
    const uint32_t n = job.plugin->PortsPerNode(request, i);
    wait.wanted.push_back(n);
    wait.answered.push_back(n == 0);
    any = any || n > 0;
  }
  if (!any) return false;
  for (uint32_t i = 0; i < request.nodes.size(); ++i) {
    if (wait.wanted[i] != 0) SendReservePorts(job, request.attempt, wait.wanted[i], request.nodes[i].name);
  }
  spdlog::info("trainjob/{}: attempt {} waits for its nodes to reserve ports", job.record.name,
               request.attempt);
  job.port_wait = std::move(wait);
  return true;
}

void JobController::SendReservePorts(const Job& job, uint32_t attempt, uint32_t count,
                                     const std::string& node) {
  v1::Envelope env;
  auto* ask = env.mutable_reserve_ports();
  ask->set_job(job.record.name);
  ask->set_attempt(attempt);
  ask->set_count(count);
  sink_->SendToNode(node, std::move(env));
}

void JobController::ResendReservePorts(const std::string& node) {
  for (const auto& [name, job] : jobs_) {
    if (!job->port_wait || !AttemptActive(name, job->port_wait->attempt)) continue;
    const PortWait& wait = *job->port_wait;
    for (size_t i = 0; i < wait.request.nodes.size(); ++i) {
      if (wait.request.nodes[i].name != node || wait.answered[i]) continue;
      // The agent may have restarted (or the coordinator's message was lost with a dropped
      // connection) before it answered; asking again is safe: it answers with the same ports.
      spdlog::info("trainjob/{}: asking node {} again for the ports of attempt {}", name, node,
                   wait.attempt);
      SendReservePorts(*job, wait.attempt, wait.wanted[i], node);
    }
  }
}

void JobController::OnPortsReserved(const std::string& node, const v1::PortsReserved& reserved,
                                    int64_t now_ms) {
  auto it = jobs_.find(reserved.job());
  Job* job = it == jobs_.end() ? nullptr : it->second.get();
  const bool waiting = job != nullptr && job->port_wait &&
                       job->port_wait->attempt == reserved.attempt() &&
                       AttemptActive(reserved.job(), reserved.attempt());
  PortWait* wait = waiting ? &*job->port_wait : nullptr;
  size_t index = SIZE_MAX;
  if (wait != nullptr) {
    for (size_t i = 0; i < wait->request.nodes.size() && index == SIZE_MAX; ++i) {
      if (wait->request.nodes[i].name == node && !wait->answered[i]) index = i;
    }
  }
  if (index == SIZE_MAX) {
    spdlog::info("node {}: dropped a port reservation for {} attempt {}, which does not wait "
                 "for one there",
                 node, reserved.job(), reserved.attempt());
    if (reserved.ports_size() > 0 && !AttemptActive(reserved.job(), reserved.attempt())) {
      // The agent would hold them until its hold timeout: give them back now. A second answer
      // for the current attempt (asked again after a re-registration) names the ports it
      // already has: nothing to give back, and its ranks must not be stopped.
      v1::Envelope env;
      auto* stop = env.mutable_stop_workers();
      stop->set_job(reserved.job());
      stop->set_attempt(reserved.attempt());
      stop->set_reason("stale port reservation");
      sink_->SendToNode(node, std::move(env));
    }
    return;
  }
  if (!reserved.error().empty()) {
    FailAttempt(*job, node + ": " + reserved.error(), now_ms);
    return;
  }
  if (static_cast<uint32_t>(reserved.ports_size()) != wait->wanted[index]) {
    FailAttempt(*job,
                node + ": reserved " + std::to_string(reserved.ports_size()) + " ports, " +
                    std::to_string(wait->wanted[index]) + " were asked for",
                now_ms);
    return;
  }
  wait->request.nodes[index].ports.assign(reserved.ports().begin(), reserved.ports().end());
  wait->answered[index] = true;
  if (std::all_of(wait->answered.begin(), wait->answered.end(), [](bool a) { return a; })) {
    LaunchWithPorts(*job, now_ms);
  }
}

void JobController::LaunchWithPorts(Job& job, int64_t now_ms) {
  TRAINLET_CHECK(job.port_wait.has_value());
  const PlanRequest& req = job.port_wait->request;
  auto plans = job.plugin->Plan(req);
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
          plans = InternalError("with ports, rank " + std::to_string(w.rank()) +
                                " moved to node " + req.nodes[i].name);
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
  if (auto b = job.spec.annotations.find("trainlet.io/binding"); b != job.spec.annotations.end()) {
    for (auto& plan : *plans) plan.set_binding(b->second);  // "none": agents bind nothing
  }
  std::vector<std::string> nodes;
  for (const auto& n : req.nodes) nodes.push_back(n.name);
  job.port_wait.reset();
  spdlog::info("trainjob/{}: ports reserved, sending the plans of attempt {}", job.record.name,
               job.record.status.attempt());
  for (size_t i = 0; i < plans->size(); ++i) {
    v1::Envelope env;
    *env.mutable_launch_plan() = std::move((*plans)[i]);
    sink_->SendToNode(nodes[i], std::move(env));
  }
}

void JobController::EndPortWait(Job& job) {
  v1::JobStatus& st = job.record.status;
  if (!job.port_wait || job.port_wait->attempt != st.attempt()) return;
  job.port_wait.reset();
  for (auto& r : *st.mutable_ranks()) {
    if (r.rank_state() != v1::RANK_STATE_PENDING) continue;
    TRAINLET_CHECK(ApplyRankTrigger(r, RankTrigger::kAttemptStopped).ok());
    r.set_message("never started: the attempt ended while its nodes reserved ports");
  }
  MarkDirty(job);
}

int64_t JobController::StartDeadlineMs(const Job& job) const {
  const v1::JobStatus& st = job.record.status;
  if (PhaseOf(st) != JobPhase::kStarting || st.deleting() || st.attempts_size() == 0) {
    return INT64_MAX;
  }
  const auto& rec = st.attempts(st.attempts_size() - 1);
  if (AttemptEnded(rec)) return INT64_MAX;
  const bool pending = std::any_of(st.ranks().begin(), st.ranks().end(), [](const auto& r) {
    return r.rank_state() == v1::RANK_STATE_PENDING;
  });
  return pending ? rec.started_unix_ms() + options_.start_timeout.count() : INT64_MAX;
}

void JobController::EnforceStartTimeouts(int64_t now_ms) {
  for (const auto& name : std::vector<std::string>(order_)) {
    auto it = jobs_.find(name);
    if (it == jobs_.end()) continue;
    Job& job = *it->second;
    if (now_ms < StartDeadlineMs(job)) continue;
    v1::JobStatus& st = job.record.status;
    // The nodes at fault, in placement order: while ports are awaited no plan has gone out, so
    // only the nodes that did not answer are; after that, those with ranks that never reported.
    std::string silent;
    if (job.port_wait && job.port_wait->attempt == st.attempt()) {
      for (size_t n = 0; n < job.port_wait->request.nodes.size(); ++n) {
        if (job.port_wait->answered[n]) continue;
        silent += (silent.empty() ? "" : ", ") + job.port_wait->request.nodes[n].name +
                  " (its ports never arrived)";
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
                "StartTimeout: ranks not started " + std::to_string(options_.start_timeout.count()) +
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
