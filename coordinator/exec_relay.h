// ExecRelay: the coordinator's half of `trainlet-exec`. It checks each request against the job
// its key belongs to, has the target node's agent start the command, and relays output, exit
// status and cancellation between the two.
//
// A session ends when the command exits; when trainlet-exec cancels it or is silent for
// kClientSilence (killed, or cut off); or when the job's attempt stops being active. In the last
// two cases the agent is told to stop the command, so nothing outlives its launcher.
//
// Owned by the coordinator's loop; no locks.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <string>

#include "common/zmq_sockets.h"
#include "coordinator/job_controller.h"

namespace trainlet::coordinator {

class ExecRelay {
 public:
  using Clock = std::chrono::steady_clock;
  using ReplyToClient = std::function<void(const std::string& routing_id, v1::Envelope env)>;
  static constexpr auto kClientSilence = std::chrono::seconds(5);

  ExecRelay(JobController* jobs, NodeSink* agents, ReplyToClient reply)
      : jobs_(jobs), agents_(agents), reply_(std::move(reply)) {}

  // A message from trainlet-exec on the exec endpoint (authenticated as msg.user_id).
  void OnClientMessage(const RouterMessage& msg, Clock::time_point now);
  // ExecOutput / ExecExited from the agent on `node`.
  void OnAgentMessage(const std::string& node, const v1::Envelope& env);
  // Ends sessions whose client went silent or whose attempt is over.
  void Tick(Clock::time_point now);
  Clock::time_point NextDeadline(Clock::time_point now) const;
  size_t sessions() const { return sessions_.size(); }

 private:
  struct Session {
    std::string routing_id;
    uint64_t client_exec_id = 0;
    std::string job;
    uint32_t attempt = 0;
    std::string node;
    Clock::time_point last_seen;
  };
  void Refuse(const std::string& routing_id, uint64_t client_exec_id, const std::string& why);
  void End(std::map<uint64_t, Session>::iterator it, const std::string& reason);

  JobController* jobs_;
  NodeSink* agents_;
  ReplyToClient reply_;
  std::map<uint64_t, Session> sessions_;  // by the coordinator's exec id
  uint64_t next_id_ = 1;
};

}  // namespace trainlet::coordinator
