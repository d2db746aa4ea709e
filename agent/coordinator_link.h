// CoordinatorLink: the agent's one connection to the coordinator, and the protocol that keeps it.
//
// It owns the CURVE DEALER socket and its handshake monitor, the outbox of messages waiting for a
// connection, the EventOutbox of worker events waiting for an ack, when the next heartbeat and
// registration go, whether the coordinator accepted this agent, and when the coordinator last
// spoke. It applies RegisterAck and HeartbeatAck itself; every message (acks included, after the
// link applied them) goes on to the owner's `message` hook.
//
// Partition detection lives here, the decision of what to stop does not: CheckPartition says
// "the coordinator has been silent past its partition grace while ranks run", once per silence,
// and the agent stops its workers. A coordinator is only expected to answer what it was sent: when
// this agent's own loop was held (a step start on a starved machine) and no heartbeat went out,
// the first one after gets a reply window before the silence counts, and the agent takes the time
// spent past the grace off its ranks' stop grace (PastGrace), so their SIGKILL still lands within
// the coordinator's restart hold.
//
// Several coordinators (high availability, `store: etcd`): Options::endpoint may list several
// agent endpoints, comma-separated; one is connected at a time. A refusal marked not_leader
// moves the link to the leader it names (unless that is the endpoint it just left for its
// silence: a follower names a dead leader until its lease ends); without one, it registers
// again with the same follower after a short pause. A coordinator silent for `failover_after`
// (or one that takes no connection that long) makes it move on to the next endpoint, and so does
// one that closes an established connection (killed, or stopping): the link does not wait out the
// silence (a standby then answers "no leader yet" until it wins, and takes the registration).
// Registering with the new leader is an ordinary registration: it adopts the running ranks and gets
// the unacknowledged events, as after a coordinator restart. With one endpoint the link never moves
// on by itself (it follows a named leader only).
//
// Ownership and threads: owned by the Agent, used only on the agent's loop thread; no locks.
// The hooks are called on that thread from inside the link's methods, so they must not call back
// into the link's Read (Send, SendEvent and the accessors are fine). Time comes from
// Options::now, so tests drive the timers and the partition grace with a fake clock.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "agent/event_outbox.h"
#include "common/curve_keys.h"
#include "common/envelope.h"
#include "common/exponential_backoff.h"
#include "common/handshake_monitor.h"
#include "common/log_rate_limit.h"
#include "common/status.h"

namespace trainlet::agent {

// 31 methods, six over the usual 25: nine are one-line accessors for the owner's poll set, the
// partition clock and metrics; the protocol itself is the other twenty-two, three of them choosing
// which coordinator of an HA set to talk to, which is part of keeping the one connection.
class CoordinatorLink {
 public:
  using Clock = std::chrono::steady_clock;

  struct Options {
    // The coordinators' agent endpoints, tcp://host:port, comma-separated (one, or the members
    // of an HA set in any order).
    std::string endpoint;
    std::string coordinator_public;  // its CURVE public key, Z85
    CurveKeyPair keys;               // this agent's key pair
    std::chrono::milliseconds heartbeat_interval{1000};
    std::chrono::milliseconds register_retry{
        2000};  // a registration unanswered this long goes again
    // After a refused registration (name taken, key bound to another name) the next one waits
    // this backoff: 250 ms doubling per consecutive refusal to 30 s, +-20%.
    ExponentialBackoff::Options register_backoff;
    std::function<Clock::time_point()> now = [] { return Clock::now(); };
    // With several endpoints: move on from a coordinator silent (or not connected) this long.
    // 0: three heartbeat intervals, at least 500 ms.
    std::chrono::milliseconds failover_after{0};
  };

  // What the link asks of its owner. All are required.
  struct Hooks {
    // A Register envelope describing the node now: NodeInfo, running ranks, exec sessions. The
    // link adds events_acked_through.
    std::function<v1::Envelope()> registration;
    // The body of the next heartbeat (node, running workers, health); the link numbers it.
    std::function<v1::Heartbeat()> heartbeat;
    std::function<void()> heartbeat_sent;  // a heartbeat was queued on the socket
    // Every message read from the coordinator, after the link applied the acks among them.
    std::function<void(const v1::Envelope&)> message;
    // The first coordinator this agent registered with gave its cluster id (RegisterAck
    // cluster_id) while the registration named none: the owner keeps it (agent state dir), and
    // names it in every registration from then on. Optional.
    std::function<void(const std::string& cluster_id)> cluster_bound;
  };

  // Connects to the coordinator (the connection itself completes later, in the background).
  // `ctx` and `drops` must outlive the link; the monitor's inproc name is unique per `ctx` only
  // once, so one link per context. Errors: a bad endpoint or key.
  static Result<std::unique_ptr<CoordinatorLink>> Connect(zmq::context_t& ctx, Options options,
                                                          Hooks hooks, DropCounters* drops);

  // Sends the first registration and makes the first heartbeat due now.
  void Start();
  // Timers and retries: a heartbeat when due, a registration again while unanswered (or once a
  // refusal's backoff ran out), then what waits in the outbox and the event outbox.
  void Tick(Clock::time_point now);
  // When Tick (or CheckPartition) next has something to do. `workers_running`: a silent
  // coordinator matters only while ranks run.
  Clock::time_point NextWake(Clock::time_point now, bool workers_running) const;

  // Queued, and retried while the coordinator is unreachable.
  void Send(v1::Envelope env);
  // A worker event: numbered, and kept until the coordinator acks it (EventOutbox). Events go
  // only while registered: a coordinator that does not know this node drops them.
  void SendEvent(v1::Envelope env);
  // Beats now and restarts the heartbeat timer (a long step start keeps the node alive).
  void HeartbeatNow();

  // The socket and the handshake monitor, for the owner's poll set (ZMQ_POLLIN); the monitor's
  // handle is null when libzmq refused the monitor.
  void* socket_handle() { return socket_.handle(); }
  void* monitor_handle() { return handshakes_.handle(); }
  // Handles up to `at_most` waiting messages, without blocking.
  void Read(int at_most);
  // Registers the moment a handshake completes, unless a refusal's backoff still runs; a refused
  // key is logged as the operator's fix.
  void OnHandshakeEvents();

  // True once per silence: the coordinator said nothing for its partition grace while
  // `running_workers` ran. Messages that waited unread (a stall of the owner's loop) are read
  // first and count. The next message from the coordinator ends the silence.
  bool CheckPartition(Clock::time_point now, size_t running_workers);
  // Starts the partition grace at `now` before the coordinator ever spoke (adopted ranks).
  void CountSilenceFrom(Clock::time_point now) { last_heard_ = now; }

  bool registered() const { return registered_; }
  // The coordinator endpoint the link is connected to now.
  const std::string& current_endpoint() const { return current_; }
  // Set by the coordinator at registration; 10 s until then.
  std::chrono::milliseconds partition_grace() const { return partition_grace_; }
  std::chrono::milliseconds SilentFor(Clock::time_point now) const;
  // How far past the partition grace the silence has run at `now` (0 within it).
  std::chrono::milliseconds PastGrace(Clock::time_point now) const;
  // The number of the newest worker event (0 before any).
  uint64_t last_event_seq() const { return events_.last_seq(); }
  size_t outbox_size() const { return outbox_.size(); }
  size_t unacked_events() const { return events_.size(); }

 private:
  CoordinatorLink(zmq::context_t& ctx, zmq::socket_t socket, Options options, Hooks hooks,
                  DropCounters* drops);
  void SendRegister();
  void SendHeartbeat(Clock::time_point now);
  // Called with every heartbeat the loop tries to send: after a gap of over StallGap (the loop
  // was held, so the coordinator was asked nothing), the coordinator gets ReplyWindow to answer
  // before its silence can count as a partition.
  void NoteBeatAttempt(Clock::time_point now);
  void FlushOutbox();
  void FlushEvents(bool everything);
  void OnRegisterAck(const v1::RegisterAck& ack);
  // An accepted registration by a coordinator whose cluster id is not the one this agent's
  // registration named (issue 19, defect 3): taken as a refusal, and nothing it sends is obeyed.
  // False when the ids agree (or the registration named none).
  bool RefuseForeignCluster(const v1::RegisterAck& ack, Clock::time_point now);
  // A refusal: the next registration waits the backoff; the reason is logged, rate-limited.
  void BackOff(const std::string& reason, Clock::time_point now);
  void OnHeartbeatAck(const v1::HeartbeatAck& ack);
  // A refusal from a coordinator that is not the leader: on to the one it names, else the next.
  void OnNotLeader(const v1::RegisterAck& ack, Clock::time_point now);
  // Several endpoints: the current one has been silent, or unconnected, past failover_after.
  void CheckFailover(Clock::time_point now);
  // Several endpoints: on from the current one to the next, saying why.
  void FailOver(Clock::time_point now, const std::string& why);
  // Disconnects from the current endpoint and connects to `endpoint`; registers again.
  void MoveTo(const std::string& endpoint, Clock::time_point now);

  // Constant after construction.
  Options options_;
  Hooks hooks_;
  DropCounters* drops_;
  // Owned by the loop.
  zmq::socket_t socket_;
  HandshakeMonitor handshakes_;
  std::vector<std::string> endpoints_;  // Options::endpoint, split
  size_t next_endpoint_ = 1;            // the next one to try after a silence (mod size)
  std::string current_;                 // connected to now
  Clock::time_point moved_at_{};        // when the link connected to current_
  Clock::time_point last_answer_{};     // the last message of any kind from a coordinator
  std::string left_silent_;             // the endpoint last left for its silence
  Clock::time_point left_silent_at_{};
  std::chrono::milliseconds failover_after_{500};
  std::deque<v1::Envelope> outbox_;
  EventOutbox events_;
  bool registered_ = false;
  // The cluster id the last registration named ("" for none), and whether the coordinator is
  // one of another cluster: then no message of it goes to the owner.
  std::string cluster_id_;
  bool foreign_ = false;
  // A registration went and has not been answered: the next refusal answers it (a refusal that
  // answers a heartbeat while a backoff runs neither counts nor restarts the wait).
  bool register_outstanding_ = false;
  ExponentialBackoff register_backoff_;  // consecutive refusals; reset by an acceptance
  Clock::time_point backoff_until_{};    // no registration before this, not even on a handshake
  LogRateLimiter refusal_log_{std::chrono::seconds(10)};  // by reason
  uint64_t heartbeat_seq_ = 0;
  Clock::time_point next_heartbeat_{};
  Clock::time_point next_register_{};
  Clock::time_point last_heard_{};  // last message from the coordinator; {} before any
  std::chrono::milliseconds partition_grace_{10000};
  bool partition_reported_ = false;        // CheckPartition said so; cleared by the next message
  Clock::time_point last_beat_attempt_{};  // the last heartbeat tried, sent or not
  Clock::time_point answer_due_{};         // after a held loop: no partition before this
};

}  // namespace trainlet::agent
