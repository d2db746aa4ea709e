// JobController's placement constraints: what each job asks of a node (resources, nodeSelector,
// tolerations), what the nodes have left, and drain's forced stop. See job_controller.h.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>

#include "coordinator/job_controller.h"
#include "coordinator/job_state_machine.h"
#include "coordinator/rank_state_machine.h"

namespace trainlet::coordinator {
namespace {

// A rank that has not ended holds its node's slot and its job's resources there (the same test
// as the controller's slot count).
bool Live(const v1::RankStatus& r) { return IsRankActive(r.rank_state()); }

}  // namespace

Status JobController::FillGangRequest(Job& job, std::vector<std::string>& warnings) const {
  TRAINLET_ASSIGN_OR_RETURN(ParsedRequests requests,
                            ParseResourceRequests(job.spec.trainer.resources_per_node));
  for (const auto& note : requests.ignored) {
    warnings.push_back("TrainJob/" + job.spec.name + ": " + note);
  }
  job.gang.resources = requests.resources;
  // The TrainJob's runtimePatches narrow the runtime's pod template: its keys win.
  job.gang.node_selector = job.spec.node_selector;
  job.gang.node_selector.insert(job.runtime.node_selector.begin(), job.runtime.node_selector.end());
  job.gang.tolerations = job.runtime.tolerations;
  job.gang.tolerations.insert(job.gang.tolerations.end(), job.spec.tolerations.begin(),
                              job.spec.tolerations.end());
  return Status::Ok();
}

std::map<std::string, Resources> JobController::UsedResources() const {
  std::map<std::string, Resources> used;
  for (const auto& [name, job] : jobs_) {
    if (job->gang.resources.empty()) continue;
    std::set<std::string_view> nodes;
    for (const auto& r : job->record.status.ranks()) {
      if (Live(r)) nodes.insert(r.node());
    }
    for (std::string_view n : nodes) used[std::string(n)] += job->gang.resources;
  }
  return used;
}

std::vector<NodeCapacity> JobController::Capacity(
    const std::map<std::string, uint32_t>& used) const {
  const std::map<std::string, Resources> used_resources = UsedResources();
  std::vector<NodeCapacity> capacity;
  capacity.reserve(registry_->nodes().size());
  for (const auto& [name, node] : registry_->nodes()) {
    NodeCapacity c;
    c.name = name;
    c.total_slots = node.info.slots();
    auto u = used.find(name);
    const uint32_t slots_used = u == used.end() ? 0 : u->second;
    c.free_slots = c.total_slots > slots_used ? c.total_slots - slots_used : 0;
    c.ready = node.state == NodeState::kReady;
    c.schedulable = node.schedulable;
    c.healthy = node.healthy;
    c.labels.insert(node.info.labels().begin(), node.info.labels().end());
    c.allocatable = AllocatableOf(node.info);
    c.free_resources = c.allocatable;
    if (auto r = used_resources.find(name); r != used_resources.end())
      c.free_resources -= r->second;
    for (const auto& t : node.info.taints()) c.taints.push_back({t.key(), t.value(), t.effect()});
    capacity.push_back(std::move(c));
  }
  return capacity;
}

std::vector<std::string> JobController::JobsOnNode(const std::string& node,
                                                   uint32_t* live_ranks) const {
  std::vector<std::string> jobs;
  uint32_t count = 0;
  for (const auto& name : order_) {
    bool here = false;
    for (const auto& r : jobs_.at(name)->record.status.ranks()) {
      if (r.node() == node && Live(r)) {
        here = true;
        ++count;
      }
    }
    if (here) jobs.push_back(name);
  }
  if (live_ranks != nullptr) *live_ranks = count;
  return jobs;
}

std::vector<std::string> JobController::FailJobsOnNode(const std::string& node,
                                                       const std::string& cause, int64_t now_ms) {
  std::vector<std::string> failed;
  for (const auto& name : JobsOnNode(node, nullptr)) {
    Job& job = *jobs_.at(name);
    const auto phase = PhaseOf(job.record.status);
    if (job.record.status.deleting() ||
        (phase != JobPhase::kStarting && phase != JobPhase::kRunning)) {
      continue;  // already stopping; its ranks end on their own
    }
    spdlog::warn("trainjob/{}: failing attempt {}: {}", name, job.record.status.attempt(), cause);
    FailAttempt(job, cause, now_ms);
    failed.push_back(name);
  }
  return failed;
}

}  // namespace trainlet::coordinator
