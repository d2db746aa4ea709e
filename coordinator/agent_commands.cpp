#include "coordinator/agent_commands.h"

#include <utility>

namespace trainlet::coordinator {

void AgentCommands::StopWorkers(const std::string& node, const std::string& job, uint32_t attempt,
                                const std::string& reason) {
  v1::Envelope env;
  auto* stop = env.mutable_stop_workers();
  stop->set_job(job);
  stop->set_attempt(attempt);
  stop->set_reason(reason);
  sink_->SendToNode(node, std::move(env));
}

void AgentCommands::ReservePorts(const std::string& node, const std::string& job, uint32_t attempt,
                                 uint32_t count) {
  v1::Envelope env;
  auto* ask = env.mutable_reserve_ports();
  ask->set_job(job);
  ask->set_attempt(attempt);
  ask->set_count(count);
  sink_->SendToNode(node, std::move(env));
}

void AgentCommands::LaunchPlan(const std::string& node, v1::LaunchPlan plan) {
  v1::Envelope env;
  *env.mutable_launch_plan() = std::move(plan);
  sink_->SendToNode(node, std::move(env));
}

}  // namespace trainlet::coordinator
