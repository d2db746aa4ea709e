// AgentCommands: the one place that builds what the coordinator tells an agent to do about a
// job's workers (StopWorkers, ReservePorts, LaunchPlan) and hands it to a NodeSink.
//
// Every command is best effort: a node that is not connected misses it, and liveness, the start
// timeout or the node's re-registration (ReconcileNode) repair what it missed.
//
// Owned by whoever owns the NodeSink's loop (the coordinator's); no locks. Holds no state.
#pragma once

#include <cstdint>
#include <string>

#include "trainlet/v1/envelope.pb.h"

namespace trainlet::coordinator {

// How long a stopped rank gets between SIGTERM and SIGKILL unless configured otherwise; the one
// default for the coordinator side (JobControllerOptions, ExecTarget).
inline constexpr uint32_t kDefaultStopGraceMs = 10000;

// A warning a stop sends before its SIGTERM (a preemption, drain --force), as Slurm's `--signal`:
// `signal` to every rank's process group, then SIGTERM `grace_ms` later, SIGKILL after the stop
// grace (StopWorkers.warning_signal, warning_grace_ms). Also sent alone before an active deadline.
struct StopWarning {
  int signal = 0;  // 0: none
  uint32_t grace_ms = 0;
};

class NodeSink {
 public:
  virtual ~NodeSink() = default;
  // Best effort: a node that is not connected misses the message; liveness handles the rest.
  virtual void SendToNode(const std::string& node, v1::Envelope env) = 0;
};

class AgentCommands {
 public:
  // `sink` outlives this.
  explicit AgentCommands(NodeSink* sink) : sink_(sink) {}

  // Stops every worker of `job`'s `attempt` on `node`, after `warning` when it has a signal;
  // `reason` is logged by the agent.
  void StopWorkers(const std::string& node, const std::string& job, uint32_t attempt,
                   const std::string& reason, const StopWarning& warning = {});
  // Sends `signal` to every worker of `job`'s `attempt` on `node` and stops nothing
  // (StopWorkers.warn_only): the warning before an active deadline.
  void WarnWorkers(const std::string& node, const std::string& job, uint32_t attempt,
                   const std::string& reason, int signal);
  // Asks `node` to hold `count` free ports for `job`'s `attempt` (answered by PortsReserved), and,
  // with a `checkpoint_path`, to report what the job's work dir holds there (work_dir_agreement.h).
  // `job_uid`: the incarnation (ReservePorts.job_uid), "" when unknown.
  void ReservePorts(const std::string& node, const std::string& job, uint32_t attempt,
                    uint32_t count, const std::string& checkpoint_path = "",
                    const std::string& job_uid = "");
  // Sends `node` its share of an attempt.
  void LaunchPlan(const std::string& node, v1::LaunchPlan plan);
  // Tells `node` that `job` (its incarnation `uid`, "" when unknown) was deleted: it removes the
  // job's logs and work dir once no worker of the job runs there (PurgeJob).
  // `shared`: this node also removes the job's shared directory (missed_purges.h).
  void PurgeJob(const std::string& node, const std::string& job, const std::string& uid = "",
                bool shared = false);

 private:
  NodeSink* sink_;
};

}  // namespace trainlet::coordinator
