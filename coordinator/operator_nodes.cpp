// OperatorService's node requests: conditions (Ready, Healthy, SchedulingDisabled, Draining) and
// resources for `get nodes`, and drain.
#include <spdlog/spdlog.h>

#include "coordinator/job_key.h"
#include "coordinator/operator_service.h"

namespace trainlet::coordinator {

void OperatorService::DescribeConditions(const NodeEntry& e, v1::NodeStatus& n) {
  auto* ready = n.add_conditions();
  ready->set_type("Ready");
  ready->set_status(e.state == NodeState::kReady ? "True" : "False");
  ready->set_reason(NodeStateName(e.state));
  ready->set_unix_ms(e.state_since_unix_ms);  // the last beat is NodeStatus.last_heartbeat_unix_ms
  auto* healthy = n.add_conditions();
  healthy->set_type("Healthy");
  healthy->set_status(e.healthy ? "True" : "False");
  healthy->set_reason(e.healthy ? "HealthChecksPassed" : "HealthCheckFailed");
  healthy->set_message(e.health_reason);
  if (!e.schedulable) {
    auto* cordoned = n.add_conditions();
    cordoned->set_type("SchedulingDisabled");
    cordoned->set_status("True");
    cordoned->set_reason(e.drained ? "Drained" : "Cordoned");
    cordoned->set_message(e.cordon_reason);
    cordoned->set_unix_ms(e.cordoned_unix_ms);
    n.set_cordon_reason(e.cordon_reason);
  }
}

// Also adds the Draining condition of drained nodes, since it too counts what runs there:
// True while ranks of some job still run on the node, False once it is empty.
void OperatorService::FillUsedResources(v1::NodeList& list) const {
  const NodeUsage usage = jobs_->Usage();
  const std::map<std::string, Resources>& used = usage.resources;
  for (auto& n : *list.mutable_nodes()) {
    const NodeEntry* entry = nodes_->Find(n.info().name());
    if (entry != nullptr && !entry->schedulable && entry->drained) {
      const uint32_t live = usage.LiveRanks(n.info().name());
      const std::vector<std::string> jobs = usage.JobsOn(n.info().name());
      auto* draining = n.add_conditions();
      draining->set_type("Draining");
      draining->set_status(live > 0 ? "True" : "False");
      draining->set_reason(live > 0 ? "RanksRunning" : "Drained");
      std::string message = std::to_string(live) + (live == 1 ? " rank" : " ranks") + " running";
      for (size_t i = 0; i < jobs.size(); ++i)
        message += (i ? ", " : " (jobs: ") + JobDisplayName(jobs[i]);
      if (!jobs.empty()) message += ")";
      draining->set_message(message);
      draining->set_unix_ms(entry->cordoned_unix_ms);
    }
    auto it = used.find(n.info().name());
    if (it == used.end()) continue;
    for (int i = 0; i < kNumResourceKinds; ++i) {
      const auto kind = static_cast<ResourceKind>(i);
      int64_t v = it->second[kind];
      if (v == 0) continue;
      // allocatable's units: cpu in whole PUs (rounded up), the rest as they are.
      if (kind == ResourceKind::kCpu) v = (v + 999) / 1000;
      (*n.mutable_used_resources())[std::string(ResourceName(kind))] = v;
    }
  }
}

Result<v1::DrainNodeResult> OperatorService::Drain(const v1::DrainNodeRequest& req, int64_t now_ms,
                                                   const std::string& user) {
  const std::string reason = req.reason().empty() ? "drained" : req.reason();
  TRAINLET_ASSIGN_OR_RETURN(
      bool changed, nodes_->SetSchedulable(req.node(), false, reason, /*drain=*/true, now_ms));
  (void)changed;
  v1::DrainNodeResult result;
  result.set_node(req.node());
  if (req.force()) {
    for (auto& job : jobs_->FailJobsOnNode(
             req.node(),
             "node drained (" + req.node() + ")" + (user.empty() ? std::string() : " by " + user),
             now_ms)) {
      result.add_stopped(JobDisplayName(job));
    }
  }
  const NodeUsage usage = jobs_->Usage();
  for (auto& job : usage.JobsOn(req.node())) result.add_jobs(JobDisplayName(job));
  result.set_running_ranks(usage.LiveRanks(req.node()));
  return result;
}

}  // namespace trainlet::coordinator
