#include "trainletctl/coordinator_client.h"

#include <map>
#include <optional>

#include "common/platform/env.h"
#include "common/platform/event_loop.h"
#include "common/zmq_sockets.h"

namespace trainlet::cli {

Result<std::unique_ptr<CoordinatorClient>> CoordinatorClient::Connect(const ClientConfig& config) {
  std::unique_ptr<CoordinatorClient> c(new CoordinatorClient());
  c->endpoint_ = config.coordinator;
  TRAINLET_ASSIGN_OR_RETURN(CurveKeyPair server, ReadKeyPair(config.coordinator_key_file));
  TRAINLET_ASSIGN_OR_RETURN(CurveKeyPair mine, ReadKeyPair(config.key_file));
  if (mine.secret_z85.empty()) return InvalidError(config.key_file + ": holds no secret-key");
  TRAINLET_ASSIGN_OR_RETURN(
      c->socket_, ConnectCurveDealer(c->ctx_, config.coordinator, server.public_z85, mine));
  // The monitor tells a refused key apart from a coordinator that is not there, and says when
  // the handshake is done, so the request goes out then rather than at the next retry tick.
  c->monitor_ = HandshakeMonitor(c->ctx_, c->socket_, "trainletctl-monitor");
  return c;
}

Result<v1::OperatorResponse> CoordinatorClient::Call(v1::OperatorRequest request,
                                                     std::chrono::milliseconds timeout) {
  const uint64_t id = next_id_++;
  request.set_request_id(id);
  v1::Envelope env;
  *env.mutable_operator_request() = std::move(request);
  const std::string bytes = EncodeEnvelope(env);
  using Loop = platform::EventLoop;
  Loop loop(platform::RealEnv());
  const auto deadline = platform::RealEnv().MonotonicNow() + timeout;
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
    if (now >= deadline) {
      finish(UnavailableError("the coordinator at " + endpoint_ + " did not answer within " +
                              std::to_string(timeout.count() / 1000) +
                              " s (is it running? trainletctl reads its address from "
                              "TRAINLET_HOME/config.yaml)"));
      return std::nullopt;
    }
    if (!sent) sent = socket_.send(zmq::buffer(bytes), zmq::send_flags::dontwait).has_value();
    return sent ? deadline : now + std::chrono::milliseconds(connected ? 1 : 20);
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
      return Status::Ok();
    case HandshakeEvent::kDisconnected:
      *connected = false;
      return Status::Ok();
    case HandshakeEvent::kRefusedKey:
      return PermissionError("the coordinator at " + endpoint_ +
                             " refused this operator key: it is not in the coordinator's "
                             "operator allowlist (see README: enrolling an operator)");
    case HandshakeEvent::kFailed:
      return PermissionError("CURVE handshake with " + endpoint_ +
                             " failed: the coordinator's public key in TRAINLET_HOME does "
                             "not match the server");
  }
  return Status::Ok();
}

std::optional<Result<v1::OperatorResponse>> CoordinatorClient::ReadReply(uint64_t id) {
  auto reply = ReceiveFromDealer(socket_, drops_);
  if (!reply || reply->body_case() != v1::Envelope::kOperatorResponse) return std::nullopt;
  v1::OperatorResponse r = std::move(*reply->mutable_operator_response());
  if (r.request_id() != id) return std::nullopt;  // a late answer to an earlier call
  if (r.error().empty()) return r;
  static const std::map<std::string, ErrorCode> kCodes = {
      {"NotFound", ErrorCode::kNotFound},
      {"Invalid", ErrorCode::kInvalid},
      {"AlreadyExists", ErrorCode::kExists},
      {"Unavailable", ErrorCode::kUnavailable},
      {"PermissionDenied", ErrorCode::kPermission}};
  auto it = kCodes.find(r.error_code());
  return Status(it == kCodes.end() ? ErrorCode::kInternal : it->second, r.error());
}

}  // namespace trainlet::cli
