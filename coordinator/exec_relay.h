// ExecRelay: the coordinator's half of `trainlet-exec`. It checks each request against the job
// its key belongs to, has the target node's agent start the command, and relays output, exit
// status and cancellation between the two.
//
// A session ends when the command exits; when trainlet-exec cancels it or is silent for
// kClientSilence (killed, or cut off); or when the job's attempt stops being active. In the last
// two cases the agent is told to stop the command, so nothing outlives its launcher.
//
// Sessions are tied to the node's name, not to its connection: an agent that restarts (kill -9
// included) and registers again keeps its sessions, as it keeps its ranks. Each ExecOutput says
// where its bytes start in their stream; the relay counts what it passed on, drops what it passed
// on already (a restarted agent resends what was not acknowledged) and acknowledges the counts in
// every HeartbeatAck to the node (AddDelivered). A session the agent does not find listed there
// is stopped by the agent, which also covers an ExecCancel lost while the agent was down. A Lost
// node fails its attempts, and that ends their sessions.
//
// Owned by the coordinator's loop; no locks.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "common/zmq_sockets.h"
#include "coordinator/job_controller.h"

namespace trainlet::coordinator {

class ExecRelay {
 public:
  using Clock = std::chrono::steady_clock;
  using ReplyToClient = std::function<void(const std::string& routing_id, v1::Envelope env)>;
  static constexpr auto kClientSilence = std::chrono::seconds(5);
  // How long a session taken back from an agent waits for its trainlet-exec to re-attach. Longer
  // than kClientSilence: after an HA failover, trainlet-exec first has to find the new leader
  // among the exec endpoints it was given (it moves on after 3 s of silence from each).
  static constexpr auto kReattachWindow = std::chrono::seconds(15);

  // Session ids start from the wall clock, so that ids of a previous coordinator process, which
  // agents may still hold, are not handed out again.
  ExecRelay(JobController* jobs, NodeSink* agents, ReplyToClient reply);

  // A message from trainlet-exec on the exec endpoint (authenticated as msg.user_id).
  void OnClientMessage(const RouterMessage& msg, Clock::time_point now);
  // The sessions a (re-)registered agent reports. One that an earlier coordinator process started
  // (its id is below this process's first) is taken back when its attempt is still active on that
  // node, with the counts the agent says were acknowledged; its trainlet-exec, which keeps the
  // session's id from the keepalive echoes, has kReattachWindow to re-attach. Known sessions and
  // those of ended attempts are left alone: the acks that follow end the latter at the agent.
  void AdoptSessions(const std::string& node,
                     const google::protobuf::RepeatedPtrField<v1::ExecSessionReport>& reports,
                     Clock::time_point now);
  // ExecOutput / ExecExited from the agent on `node`.
  void OnAgentMessage(const std::string& node, const v1::Envelope& env);
  // The node's sessions and the bytes of each stream relayed so far, for its HeartbeatAck.
  void AddDelivered(const std::string& node, v1::HeartbeatAck* ack) const;
  // Ends sessions whose client went silent or whose attempt is over.
  void Tick(Clock::time_point now);
  Clock::time_point NextDeadline(Clock::time_point now) const;
  size_t sessions() const { return sessions_.size(); }

  // The dedup rule for one stream: `data` starts at byte `offset` of the stream and `*relayed`
  // bytes have been passed on. Cuts from `data` what was passed on already, advances *relayed
  // past it, and returns false when nothing new is left. A gap (bytes that never came) is logged
  // by the caller; what follows it is still passed on.
  static bool TrimRelayed(uint64_t offset, std::string* data, uint64_t* relayed);

 private:
  struct Session {
    std::string routing_id;
    uint64_t client_exec_id = 0;
    std::string job;
    uint32_t attempt = 0;
    std::string node;
    Clock::time_point last_seen;
    Clock::duration allowed_silence = kClientSilence;  // kReattachWindow until re-attached
    uint64_t relayed[2] = {0, 0};  // bytes of stdout, stderr passed on to trainlet-exec
    // From the agent while no trainlet-exec is attached (routing_id empty: taken back after a
    // restart), passed on when it re-attaches.
    std::vector<v1::Envelope> pending;
    size_t pending_bytes = 0;
  };
  static constexpr size_t kMaxPendingBytes = 4 << 20;
  void Refuse(const std::string& routing_id, uint64_t client_exec_id, const std::string& why);
  // The session a keepalive or cancel names: by its connection and client id, or, for a
  // trainlet-exec that reconnected to a restarted coordinator, by the session id it learnt from
  // an echo, re-attached to the new connection if the client's key is its job's launcher key.
  std::map<uint64_t, Session>::iterator FindForClient(const RouterMessage& msg, uint64_t client_id,
                                                      uint64_t session_id, Clock::time_point now);
  // Stops the session's command at its agent and forgets it; `tell_client` also answers the
  // attached trainlet-exec with an exit that says `reason`, when it did not end the session itself.
  void End(std::map<uint64_t, Session>::iterator it, const std::string& reason,
           bool tell_client = false);

  JobController* jobs_;
  NodeSink* agents_;
  ReplyToClient reply_;
  std::map<uint64_t, Session> sessions_;  // by the coordinator's exec id
  uint64_t next_id_ = 1;
  uint64_t first_id_ = 1;  // ids below it were handed out by an earlier coordinator process
};

}  // namespace trainlet::coordinator
