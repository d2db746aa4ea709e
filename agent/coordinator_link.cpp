#include "agent/coordinator_link.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>

#include "common/zmq_sockets.h"

namespace trainlet::agent {

Result<std::unique_ptr<CoordinatorLink>> CoordinatorLink::Connect(zmq::context_t& ctx,
                                                                  Options options, Hooks hooks,
                                                                  DropCounters* drops) {
  TRAINLET_ASSIGN_OR_RETURN(
      zmq::socket_t socket,
      ConnectCurveDealer(ctx, options.endpoint, options.coordinator_public, options.keys));
  return std::unique_ptr<CoordinatorLink>(
      new CoordinatorLink(ctx, std::move(socket), std::move(options), std::move(hooks), drops));
}

CoordinatorLink::CoordinatorLink(zmq::context_t& ctx, zmq::socket_t socket, Options options,
                                 Hooks hooks, DropCounters* drops)
    : options_(std::move(options)),
      hooks_(std::move(hooks)),
      drops_(drops),
      socket_(std::move(socket)),
      handshakes_(ctx, socket_, "agent-coordinator-monitor"),
      register_backoff_(options_.register_backoff) {}

void CoordinatorLink::Start() {
  SendRegister();
  next_heartbeat_ = options_.now();
}

void CoordinatorLink::Tick(Clock::time_point now) {
  if (now >= next_heartbeat_) {
    SendHeartbeat();
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
    wake = std::min(wake, std::max(last_heard_ + partition_grace_, now));
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
  SendHeartbeat();
  next_heartbeat_ = options_.now() + options_.heartbeat_interval;
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
  // Registration is resent on a timer, so it never waits in the outbox behind itself.
  if (SendOnDealer(socket_, env)) register_outstanding_ = true;
  next_register_ = options_.now() + options_.register_retry;
}

void CoordinatorLink::SendHeartbeat() {
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
    if (env->has_register_ack()) OnRegisterAck(env->register_ack());
    if (env->has_heartbeat_ack()) OnHeartbeatAck(env->heartbeat_ack());
    hooks_.message(*env);
  }
}

void CoordinatorLink::OnRegisterAck(const v1::RegisterAck& ack) {
  const auto now = options_.now();
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
    register_outstanding_ = false;
    const std::chrono::milliseconds delay = register_backoff_.Fail();
    backoff_until_ = now + delay;
    next_register_ = backoff_until_;
    if (auto d = refusal_log_.Admit(ack.reason(), now); d.log) {
      spdlog::warn(
          "coordinator refused this agent's registration: {}; registering again in {} ms{}",
          ack.reason(), delay.count(), LogRateLimiter::Suffix(d));
    }
    return;
  }
  if (!registered_) {
    const uint32_t refusals = register_backoff_.failures();
    if (refusals == 0) spdlog::info("registered with {}", options_.endpoint);
    if (refusals > 0) {
      spdlog::info("registered with {} after {} refusals", options_.endpoint, refusals);
    }
  }
  registered_ = true;
  register_outstanding_ = false;
  register_backoff_.Reset();
  backoff_until_ = {};
  last_heard_ = now;
  partition_reported_ = false;
  if (ack.partition_grace_ms() != 0) {
    partition_grace_ = std::chrono::milliseconds(ack.partition_grace_ms());
  }
  FlushEvents(true);  // a new coordinator has seen none of the unacknowledged events
}

void CoordinatorLink::OnHeartbeatAck(const v1::HeartbeatAck& ack) {
  last_heard_ = options_.now();
  partition_reported_ = false;
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
    if (*event == HandshakeEvent::kRefusedKey) {
      spdlog::error(
          "the coordinator at {} refused this agent's key: add its public key to the "
          "coordinator's agent allowlist",
          options_.endpoint);
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
  partition_reported_ = true;
  return true;
}

std::chrono::milliseconds CoordinatorLink::SilentFor(Clock::time_point now) const {
  return std::chrono::duration_cast<std::chrono::milliseconds>(now - last_heard_);
}

}  // namespace trainlet::agent
