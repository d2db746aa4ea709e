#include "agent/coordinator_link.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>

#include "common/zmq_sockets.h"

namespace trainlet::agent {
namespace {

// A refusal saying no leader is known yet is answered by registering again after this pause, so
// agents do not flood the followers of an election in progress.
constexpr std::chrono::milliseconds kNoLeaderPause{250};
// A gap between heartbeats over three intervals, and at least this, is the agent's loop held. Over
// the 1-1.5 s between the beats a long step start sends (WorkerSupervisor::WaitStepReady).
constexpr std::chrono::milliseconds kMinStallGap{2000};
// What a coordinator gets to answer the first heartbeat after a held loop (two intervals, and at
// least this: a coordinator on a starved machine can itself take a second and more).
constexpr std::chrono::milliseconds kMinReplyWindow{2000};

// Whether the loop was held: no heartbeat was tried between `last` ({}: none yet) and `now` for
// over three intervals, and at least kMinStallGap.
bool LoopHeld(std::chrono::steady_clock::time_point last, std::chrono::steady_clock::time_point now,
              std::chrono::milliseconds interval) {
  return last != std::chrono::steady_clock::time_point{} &&
         now - last > std::max(3 * interval, kMinStallGap);
}

}  // namespace

Result<std::unique_ptr<CoordinatorLink>> CoordinatorLink::Connect(zmq::context_t& ctx,
                                                                  Options options, Hooks hooks,
                                                                  DropCounters* drops) {
  const std::vector<std::string> endpoints = SplitEndpointList(options.endpoint);
  if (endpoints.empty()) return InvalidError("--coordinator: no endpoint given");
  TRAINLET_ASSIGN_OR_RETURN(
      zmq::socket_t socket,
      ConnectCurveDealer(ctx, endpoints[0], options.coordinator_public, options.keys));
  std::unique_ptr<CoordinatorLink> link(
      new CoordinatorLink(ctx, std::move(socket), std::move(options), std::move(hooks), drops));
  link->endpoints_ = endpoints;
  link->current_ = endpoints[0];
  return link;
}

CoordinatorLink::CoordinatorLink(zmq::context_t& ctx, zmq::socket_t socket, Options options,
                                 Hooks hooks, DropCounters* drops)
    : options_(std::move(options)),
      hooks_(std::move(hooks)),
      drops_(drops),
      socket_(std::move(socket)),
      handshakes_(ctx, socket_, "agent-coordinator-monitor"),
      register_backoff_(options_.register_backoff) {
  failover_after_ = options_.failover_after.count() > 0
                        ? options_.failover_after
                        : std::max(3 * options_.heartbeat_interval, std::chrono::milliseconds(500));
}

void CoordinatorLink::Start() {
  SendRegister();
  next_heartbeat_ = options_.now();
  moved_at_ = next_heartbeat_;
}

void CoordinatorLink::MoveTo(const std::string& endpoint, Clock::time_point now) {
  if (endpoint != current_) {
    spdlog::info("coordinator link: moving from {} to {}", current_, endpoint);
    try {
      socket_.disconnect(current_);
    } catch (const zmq::error_t& e) {
      spdlog::debug("disconnect {}: {}", current_, e.what());
    }
    try {
      socket_.connect(endpoint);
    } catch (const zmq::error_t& e) {
      // A leader named with an address this agent cannot use: on to the next one.
      spdlog::warn("cannot connect to coordinator {}: {}", endpoint, e.what());
      socket_.connect(current_);
      return;
    }
    current_ = endpoint;
  }
  moved_at_ = now;
  registered_ = false;
  register_outstanding_ = false;
  SendRegister();  // goes once the handshake completes, else at the retry tick
}

void CoordinatorLink::CheckFailover(Clock::time_point now) {
  // With one endpoint, go back to it from a leader it named that went silent; else stay.
  const bool away = endpoints_.size() == 1 && current_ != endpoints_[0];
  if (endpoints_.size() < 2 && !away) return;
  const Clock::time_point since = std::max(last_answer_, moved_at_);
  if (now - since < failover_after_) return;
  FailOver(now,
           "silent for " +
               std::to_string(
                   std::chrono::duration_cast<std::chrono::milliseconds>(now - since).count()) +
               " ms");
}

void CoordinatorLink::FailOver(Clock::time_point now, const std::string& why) {
  std::string next = endpoints_[next_endpoint_++ % endpoints_.size()];
  if (next == current_ && endpoints_.size() > 1)
    next = endpoints_[next_endpoint_++ % endpoints_.size()];
  spdlog::warn("coordinator {} {}: trying {}", current_, why, next);
  left_silent_ = current_;
  left_silent_at_ = now;
  MoveTo(next, now);
}

void CoordinatorLink::OnNotLeader(const v1::RegisterAck& ack, Clock::time_point now) {
  register_outstanding_ = false;
  registered_ = false;
  // A follower names the old leader until its lease ends: one that just went silent here is
  // not worth a move (it would be a round trip through a dead endpoint).
  // Not believed for two failover periods: long enough for the dead leader's lease to end in
  // the common case, short beside the partition grace (a leader that was only briefly cut off
  // from this agent is gone back to well before its ranks are at risk).
  const bool stale =
      ack.leader_endpoint() == left_silent_ && now - left_silent_at_ < 2 * failover_after_;
  if (!ack.leader_endpoint().empty() && ack.leader_endpoint() != current_ && !stale) {
    if (auto d = refusal_log_.Admit("not leader " + ack.leader_endpoint(), now); d.log) {
      spdlog::info("{} is not the leader: registering with {}", current_, ack.leader_endpoint());
    }
    MoveTo(ack.leader_endpoint(), now);
    return;
  }
  // No leader known yet (an election in progress): this coordinator answers, so ask it again
  // after a pause; it names the new leader once there is one, or becomes it.
  if (auto d = refusal_log_.Admit(ack.reason(), now); d.log) {
    spdlog::info("{}: {}{}", current_, ack.reason(), LogRateLimiter::Suffix(d));
  }
  next_register_ = now + kNoLeaderPause;
}

void CoordinatorLink::Tick(Clock::time_point now) {
  CheckFailover(now);
  if (now >= next_heartbeat_) {
    SendHeartbeat(now);
    next_heartbeat_ = now + options_.heartbeat_interval;
  }
  if (!registered_ && now >= next_register_) SendRegister();
  FlushOutbox();
  FlushEvents(false);
}

CoordinatorLink::Clock::time_point CoordinatorLink::NextWake(Clock::time_point now,
                                                             bool workers_running) const {
  auto wake = std::min(next_heartbeat_, registered_ ? next_heartbeat_ : next_register_);
  if (!outbox_.empty()) wake = std::min(wake, now + std::chrono::milliseconds(50));
  if (auto due = events_.NextDue(); due && registered_) {
    wake = std::min(wake, std::max(*due, now + std::chrono::milliseconds(50)));
  }
  if (last_heard_ != Clock::time_point{} && !partition_reported_ && workers_running) {
    wake = std::min(wake, std::max(std::max(last_heard_ + partition_grace_, answer_due_), now));
  }
  if (endpoints_.size() > 1 || current_ != endpoints_[0]) {
    wake = std::min(wake, std::max(std::max(last_answer_, moved_at_) + failover_after_, now));
  }
  return wake;
}

void CoordinatorLink::Send(v1::Envelope env) {
  outbox_.push_back(std::move(env));
  FlushOutbox();
}

void CoordinatorLink::SendEvent(v1::Envelope env) {
  events_.Add(std::move(env));
  FlushEvents(false);
}

void CoordinatorLink::HeartbeatNow() {
  const auto now = options_.now();
  SendHeartbeat(now);
  next_heartbeat_ = now + options_.heartbeat_interval;
}

void CoordinatorLink::FlushOutbox() {
  while (!outbox_.empty()) {
    if (!SendOnDealer(socket_, outbox_.front())) return;  // not connected: keep, retry later
    outbox_.pop_front();
  }
}

void CoordinatorLink::FlushEvents(bool everything) {
  // Events wait for a registration: a coordinator that does not know this node drops them.
  if (!registered_) return;
  auto due = events_.Due(options_.now(), everything);
  for (size_t i = 0; i < due.size(); ++i) {
    if (!SendOnDealer(socket_, *due[i])) {
      events_.Unsent(due, i);
      return;
    }
  }
}

void CoordinatorLink::SendRegister() {
  v1::Envelope env = hooks_.registration();
  env.mutable_register_()->set_events_acked_through(events_.acked_through());
  cluster_id_ = env.register_().cluster_id();
  // Registration is resent on a timer, so it never waits in the outbox behind itself.
  if (SendOnDealer(socket_, env)) register_outstanding_ = true;
  next_register_ = options_.now() + options_.register_retry;
}

void CoordinatorLink::NoteBeatAttempt(Clock::time_point now) {
  // Attempts, not sends: one that fails (no connection) still shows the loop ran, so the silence
  // that follows stays the coordinator's.
  if (LoopHeld(last_beat_attempt_, now, options_.heartbeat_interval) &&
      last_heard_ != Clock::time_point{} && !partition_reported_) {
    const auto gap = now - last_beat_attempt_;
    const auto window = std::max(2 * options_.heartbeat_interval, kMinReplyWindow);
    answer_due_ = now + window;
    spdlog::warn(
        "no heartbeat could go for {} ms: this agent's loop was held (a slow start or a starved "
        "machine), not the coordinator silent; it gets {} ms to answer before its silence counts",
        std::chrono::duration_cast<std::chrono::milliseconds>(gap).count(), window.count());
  }
  last_beat_attempt_ = now;
}

void CoordinatorLink::SendHeartbeat(Clock::time_point now) {
  NoteBeatAttempt(now);
  v1::Envelope env;
  *env.mutable_heartbeat() = hooks_.heartbeat();
  env.mutable_heartbeat()->set_seq(++heartbeat_seq_);
  // A heartbeat that cannot go now is worthless later: never queue it.
  if (SendOnDealer(socket_, env)) hooks_.heartbeat_sent();
}

void CoordinatorLink::Read(int at_most) {
  for (int i = 0; i < at_most; ++i) {
    auto env = ReceiveFromDealer(socket_, *drops_);
    if (!env) {
      if (!(socket_.get(zmq::sockopt::events) & ZMQ_POLLIN)) break;
      continue;
    }
    last_answer_ = options_.now();
    if (env->has_register_ack()) OnRegisterAck(env->register_ack());
    if (foreign_) {
      // A coordinator of another cluster (its store lost and made anew, or another cluster's):
      // it knows none of this node's attempts, so none of its word is obeyed, least of all a
      // stop (issue 19, defect 3).
      drops_->Add(DropReason::kUnauthorized);
      continue;
    }
    if (env->has_heartbeat_ack()) OnHeartbeatAck(env->heartbeat_ack());
    hooks_.message(*env);
  }
}

void CoordinatorLink::OnRegisterAck(const v1::RegisterAck& ack) {
  const auto now = options_.now();
  if (!ack.accepted() && ack.not_leader()) return OnNotLeader(ack, now);
  if (!ack.accepted() && registered_) {
    // The coordinator no longer knows this node (it restarted, or declared the node Lost): that
    // is no refusal of a registration, so register again at once.
    spdlog::warn("coordinator asks to register again: {}", ack.reason());
    registered_ = false;
    SendRegister();
    return;
  }
  if (!ack.accepted()) {
    // A refused registration (the name is taken, the key is bound to another name) is refused
    // again until an operator or the liveness timer acts: retrying at once floods both sides.
    if (!register_outstanding_) return;  // a heartbeat's answer while the backoff runs
    BackOff("coordinator refused this agent's registration: " + ack.reason(), now);
    return;
  }
  if (RefuseForeignCluster(ack, now)) return;
  if (cluster_id_.empty() && !ack.cluster_id().empty() && hooks_.cluster_bound) {
    cluster_id_ = ack.cluster_id();
    hooks_.cluster_bound(ack.cluster_id());
  }
  if (!registered_) {
    const uint32_t refusals = register_backoff_.failures();
    if (refusals == 0) spdlog::info("registered with {}", current_);
    if (refusals > 0) spdlog::info("registered with {} after {} refusals", current_, refusals);
  }
  registered_ = true;
  register_outstanding_ = false;
  register_backoff_.Reset();
  backoff_until_ = {};
  last_heard_ = now;
  partition_reported_ = false;
  answer_due_ = {};
  if (ack.partition_grace_ms() != 0) {
    partition_grace_ = std::chrono::milliseconds(ack.partition_grace_ms());
  }
  FlushEvents(true);  // a new coordinator has seen none of the unacknowledged events
}

void CoordinatorLink::BackOff(const std::string& reason, Clock::time_point now) {
  register_outstanding_ = false;
  const std::chrono::milliseconds delay = register_backoff_.Fail();
  backoff_until_ = now + delay;
  next_register_ = backoff_until_;
  if (auto d = refusal_log_.Admit(reason, now); d.log) {
    spdlog::warn("{}; registering again in {} ms{}", reason, delay.count(),
                 LogRateLimiter::Suffix(d));
  }
}

bool CoordinatorLink::RefuseForeignCluster(const v1::RegisterAck& ack, Clock::time_point now) {
  foreign_ = !cluster_id_.empty() && ack.cluster_id() != cluster_id_;
  if (!foreign_) return false;
  registered_ = false;
  if (auto d = refusal_log_.Admit("foreign " + ack.cluster_id(), now); d.log) {
    spdlog::error(
        "the coordinator at {} is cluster {}, but this agent belongs to cluster {}: refusing it "
        "(its store was lost or made anew, or it is another cluster's). This agent stops nothing "
        "on its word; its ranks run on under the partition grace. To join this agent to that "
        "cluster, delete the cluster-id file in its state dir (docs/operations.md){}",
        current_, ack.cluster_id().empty() ? "(none)" : ack.cluster_id(), cluster_id_,
        LogRateLimiter::Suffix(d));
  }
  register_outstanding_ = true;  // BackOff answers it
  BackOff("refused the coordinator of cluster " + ack.cluster_id(), now);
  return true;
}

void CoordinatorLink::OnHeartbeatAck(const v1::HeartbeatAck& ack) {
  last_heard_ = options_.now();
  partition_reported_ = false;
  answer_due_ = {};
  // Before this agent's registration is accepted, an ack counts the events of a previous agent on
  // this node (a restart): applying it would drop this agent's unsent events.
  if (registered_) events_.Ack(ack.acked_event_seq());
}

void CoordinatorLink::OnHandshakeEvents() {
  while (auto event = handshakes_.Read()) {
    // The first registration at start-up, and one after a partition, is sent once the connection
    // is usable rather than at the next register_retry tick (ZMQ_IMMEDIATE drops earlier sends).
    // A reconnection does not cut a refusal's backoff short: Tick registers when it ran out.
    if (*event == HandshakeEvent::kSucceeded && !registered_ && options_.now() >= backoff_until_) {
      SendRegister();
    }
    // A killed (or stopping) coordinator closes the connection: with others to try, go now
    // instead of after failover_after of silence. Not for a connection this link just left
    // (MoveTo's own disconnect) or one that never answered.
    if (*event == HandshakeEvent::kDisconnected && endpoints_.size() > 1 &&
        last_answer_ > moved_at_) {
      FailOver(options_.now(), "closed the connection");
    }
    if (*event == HandshakeEvent::kRefusedKey) {
      spdlog::error(
          "the coordinator at {} refused this agent's key: add its public key to the "
          "coordinator's agent allowlist",
          current_);
    }
  }
}

bool CoordinatorLink::CheckPartition(Clock::time_point now, size_t running_workers) {
  if (last_heard_ == Clock::time_point{} || partition_reported_) return false;
  if (now - last_heard_ < partition_grace_ || running_workers == 0) return false;
  // After a long stall of the owner's loop (starting hundreds of ranks on a busy machine) the
  // coordinator's answers to the beats sent meanwhile are waiting unread: read them first.
  Read(1024);
  if (now - last_heard_ < partition_grace_ || partition_reported_) return false;
  // Nothing went to the coordinator for a while (the loop was held until now): ask it first.
  if (LoopHeld(last_beat_attempt_, now, options_.heartbeat_interval)) {
    SendHeartbeat(now);
    next_heartbeat_ = now + options_.heartbeat_interval;
  }
  if (now < answer_due_) return false;
  partition_reported_ = true;
  return true;
}

std::chrono::milliseconds CoordinatorLink::PastGrace(Clock::time_point now) const {
  return std::max(std::chrono::milliseconds(0), SilentFor(now) - partition_grace_);
}

std::chrono::milliseconds CoordinatorLink::SilentFor(Clock::time_point now) const {
  return std::chrono::duration_cast<std::chrono::milliseconds>(now - last_heard_);
}

}  // namespace trainlet::agent
