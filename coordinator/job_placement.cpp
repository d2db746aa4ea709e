// JobController's placement bookkeeping: what its placed jobs hold on each node, which jobs run
// where, and drain's forced stop. What a job asks and what a node has are built by
// placement_inputs.h. See job_controller.h.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>

#include "coordinator/job_controller.h"
#include "coordinator/job_state_machine.h"

namespace trainlet::coordinator {
namespace {

// A rank that has not ended holds its node's slot and its job's resources there.
bool Live(const v1::RankStatus& r) { return !RankEnded(r); }

}  // namespace

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
    const JobPhase phase = PhaseOf(job.record.status);
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
