#include "trainletctl/coordinator_client.h"

#include <map>
#include <optional>
#include <set>
#include <thread>

#include "common/platform/env.h"
#include "common/platform/event_loop.h"
#include "common/zmq_sockets.h"

namespace trainlet::cli {

namespace {

// After every endpoint refused (an election in progress), the round starts again after this.
constexpr std::chrono::milliseconds kRoundPause{200};

}  // namespace

Result<std::unique_ptr<CoordinatorClient>> CoordinatorClient::Connect(const ClientConfig& config) {
  std::unique_ptr<CoordinatorClient> c(new CoordinatorClient());
  c->endpoints_ = SplitEndpointList(config.coordinator);
  if (c->endpoints_.empty()) return InvalidError("coordinator: no endpoint given");
  c->endpoint_ = c->endpoints_[0];
  TRAINLET_ASSIGN_OR_RETURN(CurveKeyPair server, ReadKeyPair(config.coordinator_key_file));
  TRAINLET_ASSIGN_OR_RETURN(CurveKeyPair mine, ReadKeyPair(config.key_file));
  if (mine.secret_z85.empty()) return InvalidError(config.key_file + ": holds no secret-key");
  c->server_public_ = server.public_z85;
  c->keys_ = mine;
  c->request_timeout_ = config.request_timeout;
  TRAINLET_ASSIGN_OR_RETURN(c->socket_,
                            ConnectCurveDealer(c->ctx_, c->endpoint_, server.public_z85, mine));
  // The monitor tells a refused key apart from a coordinator that is not there, and says when
  // the handshake is done, so the request goes out then rather than at the next retry tick.
  c->monitor_ = HandshakeMonitor(c->ctx_, c->socket_, "trainletctl-monitor", true);
  return c;
}

Status CoordinatorClient::MoveTo(const std::string& endpoint) {
  if (endpoint == endpoint_) return Status::Ok();
  // A new socket and monitor rather than disconnect and connect on the old one: a send right
  // after a disconnect may still go down the old connection's pipe and be lost, and the old
  // connection's events would read as the new one's.
  monitor_ = HandshakeMonitor();
  socket_.set(zmq::sockopt::linger, 0);
  socket_.close();
  TRAINLET_ASSIGN_OR_RETURN(socket_, ConnectCurveDealer(ctx_, endpoint, server_public_, keys_));
  monitor_ = HandshakeMonitor(ctx_, socket_,
                              "trainletctl-monitor-" + std::to_string(++connections_), true);
  refused_since_.reset();
  endpoint_ = endpoint;
  failed_handshakes_ = 0;
  return Status::Ok();
}

Result<v1::OperatorResponse> CoordinatorClient::Call(v1::OperatorRequest request) {
  return Call(std::move(request), request_timeout_);
}

Result<v1::OperatorResponse> CoordinatorClient::Call(v1::OperatorRequest request,
                                                     std::chrono::milliseconds timeout) {
  const uint64_t id = next_id_++;
  request.set_request_id(id);
  v1::Envelope env;
  *env.mutable_operator_request() = std::move(request);
  const std::string bytes = EncodeEnvelope(env);
  const auto deadline = platform::RealEnv().MonotonicNow() + timeout;
  if (endpoints_.size() < 2) {  // one coordinator: wait for it, as ever
    while (true) {
      Result<v1::OperatorResponse> r = CallOne(bytes, id, timeout, deadline, deadline);
      if (!moved_on_) return r;
      if (!moved_on_->empty()) {  // it names a leader: one hop there
        TRAINLET_RETURN_IF_ERROR(MoveTo(*moved_on_));
        return CallOne(bytes, id, timeout, deadline, deadline);
      }
      // A follower that knows no leader yet (it has just started, or an election runs): asked
      // again until the deadline, as a list of coordinators is, rather than failing at once.
      if (platform::RealEnv().MonotonicNow() + kRoundPause >= deadline) return r;
      std::this_thread::sleep_for(kRoundPause);
    }
  }
  size_t next = 1;
  size_t tried_in_round = 0;
  std::optional<Status> last;
  std::set<std::string> unreachable;  // took no connection during this call
  while (platform::RealEnv().MonotonicNow() < deadline) {
    Result<v1::OperatorResponse> r =
        CallOne(bytes, id, timeout, deadline,
                std::min(deadline, platform::RealEnv().MonotonicNow() + kConnectTimeout));
    if (!moved_on_) return r;
    // A follower's refusal says more (who leads, why none does) than a connection that failed.
    if (refused_as_follower_ || !last) last = r.status();
    if (!refused_as_follower_) unreachable.insert(endpoint_);
    // The leader it named, unless that one took no connection just now: a follower names a dead
    // leader until its lease ends.
    if (!moved_on_->empty() && *moved_on_ != endpoint_ && unreachable.count(*moved_on_) == 0) {
      TRAINLET_RETURN_IF_ERROR(MoveTo(*moved_on_));
      continue;
    }
    // The next endpoint that took a connection during this call; none: every one refused or
    // is unreachable (an election runs), so pause, then ask a live one (this one) again.
    std::string to;
    for (size_t i = 0; i < endpoints_.size() && to.empty(); ++i) {
      const std::string& c = endpoints_[next++ % endpoints_.size()];
      if (c != endpoint_ && unreachable.count(c) == 0) to = c;
    }
    if (to.empty() || ++tried_in_round >= endpoints_.size()) {
      tried_in_round = 0;
      std::this_thread::sleep_for(kRoundPause);
      if (to.empty() && !refused_as_follower_) {  // nothing answers: try them all again
        unreachable.clear();
        to = endpoints_[next++ % endpoints_.size()];
      }
      if (to.empty()) to = endpoint_;
    }
    TRAINLET_RETURN_IF_ERROR(MoveTo(to));
  }
  std::string list;
  for (const auto& e : endpoints_) list += (list.empty() ? "" : ", ") + e;
  return UnavailableError("no coordinator of " + list + " answered as leader within " +
                          std::to_string(timeout.count() / 1000) + " s" +
                          (last ? " (last: " + last->message() + ")" : std::string()));
}

Result<v1::OperatorResponse> CoordinatorClient::CallOne(
    const std::string& bytes, uint64_t id, std::chrono::milliseconds timeout,
    std::chrono::steady_clock::time_point deadline,
    std::chrono::steady_clock::time_point connect_by) {
  using Loop = platform::EventLoop;
  Loop loop(platform::RealEnv());
  moved_on_.reset();
  refused_as_follower_ = false;
  bool sent = false;
  bool connected = false;  // the handshake succeeded: a send that failed is retried at once
  std::optional<Result<v1::OperatorResponse>> answer;
  auto finish = [&](Result<v1::OperatorResponse> r) {
    answer.emplace(std::move(r));
    loop.Stop();
  };
  // Each iteration: give up at the deadline, else send until the request leaves (ZMQ_IMMEDIATE:
  // sending fails until the connection is up, so nothing is queued blind).
  loop.AddTick([&](Loop::TimePoint now) -> std::optional<Loop::TimePoint> {
    if (!sent && now >= connect_by && now < deadline) {
      moved_on_ = "";  // never sent: the next endpoint may have it
      finish(UnavailableError("the coordinator at " + endpoint_ + " took no connection within " +
                              std::to_string(kConnectTimeout.count()) + " ms"));
      return std::nullopt;
    }
    if (!sent && !ever_connected_ && endpoints_.size() < 2 && refused_since_ &&
        now - *refused_since_ >= kRefusedFor) {
      finish(UnavailableError("nothing accepts connections at " + endpoint_ + " (refused for " +
                              std::to_string(kRefusedFor.count() / 1000) +
                              " s): is the coordinator running? trainletctl reads its address "
                              "from TRAINLET_HOME/config.yaml"));
      return std::nullopt;
    }
    if (now >= deadline) {
      if (!sent) moved_on_ = "";  // never sent: Call says what the other endpoints answered
      finish(UnavailableError("the coordinator at " + endpoint_ + " did not answer within " +
                              std::to_string(timeout.count() / 1000) +
                              " s (is it running? trainletctl reads its address from "
                              "TRAINLET_HOME/config.yaml)"));
      return std::nullopt;
    }
    if (!sent) sent = socket_.send(zmq::buffer(bytes), zmq::send_flags::dontwait).has_value();
    return sent ? deadline
                : std::min(connect_by, now + std::chrono::milliseconds(connected ? 1 : 20));
  });
  if (monitor_.handle() != nullptr) {
    loop.AddSocket(monitor_.handle(), Loop::kReadable, [&](short) {
      const bool was_connected = connected;
      if (Status refused = OnHandshakeEvent(&connected); !refused.ok()) return finish(refused);
      // The connection dropped with the request out: its answer will never come on this one.
      // The socket cuts a peer whose message is over kMaxMessageBytes, so that is the likely
      // cause; the other is a coordinator that stopped.
      if (sent && was_connected && !connected) {
        finish(UnavailableError(
            "the coordinator at " + endpoint_ +
            " closed the connection before answering: the response was too large (over the " +
            std::to_string(kMaxMessageBytes) +
            " bytes one message may carry), or the coordinator stopped"));
      }
    });
  }
  loop.AddSocket(socket_.handle(), Loop::kReadable, [&](short) {
    if (auto reply = ReadReply(id)) finish(std::move(*reply));
  });
  while (!answer) {
    if (Status s = loop.RunOnce(Loop::kForever); !s.ok()) return s;
  }
  return std::move(*answer);
}

Status CoordinatorClient::OnHandshakeEvent(bool* connected) {
  const std::optional<HandshakeEvent> event = monitor_.Read();
  if (!event) return Status::Ok();  // nothing after all
  switch (*event) {
    case HandshakeEvent::kSucceeded:
      *connected = true;
      failed_handshakes_ = 0;
      ever_connected_ = true;
      refused_since_.reset();
      return Status::Ok();
    case HandshakeEvent::kConnectRetried:
      if (!refused_since_) refused_since_ = platform::RealEnv().MonotonicNow();
      return Status::Ok();
    case HandshakeEvent::kDisconnected:
      *connected = false;
      return Status::Ok();
    case HandshakeEvent::kRefusedKey:
      return PermissionError("the coordinator at " + endpoint_ +
                             " refused this operator key: it is not in the coordinator's "
                             "operator allowlist (see README: enrolling an operator)");
    case HandshakeEvent::kFailed:
      // libzmq retries by itself; a restarting coordinator answers the next try, or none.
      if (++failed_handshakes_ < kFailedHandshakesForWrongKey) return Status::Ok();
      return PermissionError("CURVE handshake with " + endpoint_ + " failed " +
                             std::to_string(failed_handshakes_) +
                             " times in a row: the coordinator's public key in TRAINLET_HOME "
                             "does not match the server");
  }
  return Status::Ok();
}

std::optional<Result<v1::OperatorResponse>> CoordinatorClient::ReadReply(uint64_t id) {
  auto reply = ReceiveFromDealer(socket_, drops_);
  if (!reply || reply->body_case() != v1::Envelope::kOperatorResponse) return std::nullopt;
  v1::OperatorResponse r = std::move(*reply->mutable_operator_response());
  if (r.request_id() != id) return std::nullopt;  // a late answer to an earlier call
  if (r.error().empty()) return r;
  if (r.error_code() == "NotLeader") {
    moved_on_ = r.leader();  // "" when none is known yet
    refused_as_follower_ = true;
  }
  static const std::map<std::string, ErrorCode> kCodes = {
      {"NotFound", ErrorCode::kNotFound},           {"Invalid", ErrorCode::kInvalid},
      {"AlreadyExists", ErrorCode::kExists},        {"Unavailable", ErrorCode::kUnavailable},
      {"PermissionDenied", ErrorCode::kPermission}, {"NotLeader", ErrorCode::kUnavailable}};
  auto it = kCodes.find(r.error_code());
  return Status(it == kCodes.end() ? ErrorCode::kInternal : it->second, r.error());
}

}  // namespace trainlet::cli
