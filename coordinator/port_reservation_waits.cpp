#include "coordinator/port_reservation_waits.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>

namespace trainlet::coordinator {

PortReservationWaits::PortReservationWaits(AgentCommands* agents, AttemptActiveFn active)
    : agents_(agents), active_(std::move(active)) {}

bool PortReservationWaits::Begin(const std::string& job, const PlanRequest& request,
                                 const AttemptLayout& layout, const std::string& checkpoint,
                                 const std::string& job_uid) {
  waits_.erase(job);  // whatever an earlier attempt waited for is moot now
  TRAINLET_CHECK(layout.nodes.size() == request.nodes.size());
  Wait wait;
  for (const NodeLayout& node : layout.nodes) {
    wait.wanted.push_back(node.ports);
    wait.answered.push_back(node.ports == 0 && checkpoint.empty());
  }
  const std::vector<uint32_t>& wanted = wait.wanted;
  if (std::all_of(wait.answered.begin(), wait.answered.end(), [](bool a) { return a; })) {
    return false;
  }
  wait.attempt = request.attempt;
  wait.request = request;
  wait.layout = layout;
  wait.checkpoint = checkpoint;
  wait.job_uid = job_uid;
  wait.work_dirs.resize(request.nodes.size());
  for (size_t i = 0; i < request.nodes.size(); ++i) {
    if (!wait.answered[i]) {
      agents_->ReservePorts(request.nodes[i].name, job, request.attempt, wanted[i], checkpoint,
                            job_uid);
    }
  }
  spdlog::info("trainjob/{}: attempt {} waits for its nodes to reserve ports", job,
               request.attempt);
  waits_[job] = std::move(wait);
  return true;
}

void PortReservationWaits::Resend(const std::string& node) {
  for (const auto& [job, wait] : waits_) {
    if (!active_(job, wait.attempt)) continue;
    for (size_t i = 0; i < wait.request.nodes.size(); ++i) {
      if (wait.request.nodes[i].name != node || wait.answered[i]) continue;
      // The agent may have restarted (or the coordinator's message was lost with a dropped
      // connection) before it answered; asking again is safe: it answers with the same ports.
      spdlog::info("trainjob/{}: asking node {} again for the ports of attempt {}", job, node,
                   wait.attempt);
      agents_->ReservePorts(node, job, wait.attempt, wait.wanted[i], wait.checkpoint, wait.job_uid);
    }
  }
}

PortReservationWaits::Outcome PortReservationWaits::Record(const std::string& node,
                                                           const v1::PortsReserved& reserved,
                                                           std::string* why) {
  const bool active = active_(reserved.job(), reserved.attempt());
  auto it = waits_.find(reserved.job());
  Wait* wait = it != waits_.end() && it->second.attempt == reserved.attempt() && active
                   ? &it->second
                   : nullptr;
  size_t index = SIZE_MAX;
  for (size_t i = 0; wait != nullptr && i < wait->request.nodes.size() && index == SIZE_MAX; ++i) {
    if (wait->request.nodes[i].name == node && !wait->answered[i]) index = i;
  }
  if (index == SIZE_MAX) {
    spdlog::info(
        "node {}: dropped a port reservation for {} attempt {}, which does not wait "
        "for one there",
        node, reserved.job(), reserved.attempt());
    if (reserved.ports_size() > 0 && !active) {
      // The agent would hold them until its hold timeout: give them back now. A second answer
      // for the current attempt (asked again after a re-registration) names the ports it
      // already has: nothing to give back, and its ranks must not be stopped.
      agents_->StopWorkers(node, reserved.job(), reserved.attempt(), "stale port reservation");
    }
    return Outcome::kDropped;
  }
  if (!reserved.error().empty()) {
    *why = node + ": " + reserved.error();
    return Outcome::kRefused;
  }
  if (static_cast<uint32_t>(reserved.ports_size()) != wait->wanted[index]) {
    *why = node + ": reserved " + std::to_string(reserved.ports_size()) + " ports, " +
           std::to_string(wait->wanted[index]) + " were asked for";
    return Outcome::kRefused;
  }
  wait->request.nodes[index].ports.assign(reserved.ports().begin(), reserved.ports().end());
  wait->work_dirs[index] = reserved.work_dir();
  wait->answered[index] = true;
  const bool all =
      std::all_of(wait->answered.begin(), wait->answered.end(), [](bool a) { return a; });
  return all ? Outcome::kComplete : Outcome::kWaiting;
}

const PortReservationWaits::Wait* PortReservationWaits::Find(const std::string& job,
                                                             uint32_t attempt) const {
  auto it = waits_.find(job);
  return it == waits_.end() || it->second.attempt != attempt ? nullptr : &it->second;
}

const PlanRequest* PortReservationWaits::Request(const std::string& job, uint32_t attempt) const {
  const Wait* wait = Find(job, attempt);
  return wait == nullptr ? nullptr : &wait->request;
}

const AttemptLayout* PortReservationWaits::Layout(const std::string& job, uint32_t attempt) const {
  const Wait* wait = Find(job, attempt);
  return wait == nullptr ? nullptr : &wait->layout;
}

std::vector<std::string> PortReservationWaits::Unanswered(const std::string& job,
                                                          uint32_t attempt) const {
  std::vector<std::string> nodes;
  const Wait* wait = Find(job, attempt);
  for (size_t i = 0; wait != nullptr && i < wait->request.nodes.size(); ++i) {
    if (!wait->answered[i]) nodes.push_back(wait->request.nodes[i].name);
  }
  return nodes;
}

std::vector<v1::WorkDirState> PortReservationWaits::WorkDirStates(const std::string& job,
                                                                  uint32_t attempt) const {
  const Wait* wait = Find(job, attempt);
  if (wait == nullptr || wait->checkpoint.empty()) return {};
  return wait->work_dirs;
}

std::string PortReservationWaits::Checkpoint(const std::string& job, uint32_t attempt) const {
  const Wait* wait = Find(job, attempt);
  return wait == nullptr ? "" : wait->checkpoint;
}

bool PortReservationWaits::End(const std::string& job, uint32_t attempt) {
  if (Find(job, attempt) == nullptr) return false;
  waits_.erase(job);
  return true;
}

}  // namespace trainlet::coordinator
