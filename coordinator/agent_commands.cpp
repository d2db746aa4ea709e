#include "coordinator/agent_commands.h"

#include <utility>

namespace trainlet::coordinator {

void AgentCommands::StopWorkers(const std::string& node, const std::string& job, uint32_t attempt,
                                const std::string& reason, const StopWarning& warning) {
  v1::Envelope env;
  auto* stop = env.mutable_stop_workers();
  stop->set_job(job);
  stop->set_attempt(attempt);
  stop->set_reason(reason);
  if (warning.signal != 0) {
    stop->set_warning_signal(warning.signal);
    stop->set_warning_grace_ms(warning.grace_ms);
  }
  sink_->SendToNode(node, std::move(env));
}

void AgentCommands::WarnWorkers(const std::string& node, const std::string& job, uint32_t attempt,
                                const std::string& reason, int signal) {
  v1::Envelope env;
  auto* warn = env.mutable_stop_workers();
  warn->set_job(job);
  warn->set_attempt(attempt);
  warn->set_reason(reason);
  warn->set_warning_signal(signal);
  warn->set_warn_only(true);
  sink_->SendToNode(node, std::move(env));
}

void AgentCommands::ReservePorts(const std::string& node, const std::string& job, uint32_t attempt,
                                 uint32_t count, const std::string& checkpoint_path,
                                 const std::string& job_uid) {
  v1::Envelope env;
  auto* ask = env.mutable_reserve_ports();
  ask->set_job(job);
  ask->set_attempt(attempt);
  ask->set_count(count);
  ask->set_checkpoint_path(checkpoint_path);
  ask->set_job_uid(job_uid);
  sink_->SendToNode(node, std::move(env));
}

void AgentCommands::LaunchPlan(const std::string& node, v1::LaunchPlan plan) {
  v1::Envelope env;
  *env.mutable_launch_plan() = std::move(plan);
  sink_->SendToNode(node, std::move(env));
}

void AgentCommands::PurgeJob(const std::string& node, const std::string& job,
                             const std::string& uid, bool shared) {
  v1::Envelope env;
  env.mutable_purge_job()->set_job(job);
  env.mutable_purge_job()->set_uid(uid);
  env.mutable_purge_job()->set_shared_dir(shared);
  sink_->SendToNode(node, std::move(env));
}

}  // namespace trainlet::coordinator
