#include "trainletctl/coordinator_client.h"

#include <map>

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
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  bool sent = false;
  bool connected = false;  // the handshake succeeded: a send that failed is retried at once
  while (true) {
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) {
      return UnavailableError("the coordinator at " + endpoint_ + " did not answer within " +
                              std::to_string(timeout.count() / 1000) +
                              " s (is it running? trainletctl reads its address from "
                              "TRAINLET_HOME/config.yaml)");
    }
    if (!sent) {
      // ZMQ_IMMEDIATE: sending fails until the connection is up, so nothing is queued blind.
      sent = socket_.send(zmq::buffer(bytes), zmq::send_flags::dontwait).has_value();
    }
    std::vector<zmq_pollitem_t> items = {{socket_.handle(), 0, ZMQ_POLLIN, 0}};
    if (monitor_.handle() != nullptr) items.push_back({monitor_.handle(), 0, ZMQ_POLLIN, 0});
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now);
    zmq_poll(items.data(), static_cast<int>(items.size()),
             sent ? static_cast<long>(left.count()) : (connected ? 1L : 20L));
    if (items.size() > 1 && (items[1].revents & ZMQ_POLLIN)) {
      switch (monitor_.Read().value_or(HandshakeEvent::kDisconnected)) {
        case HandshakeEvent::kSucceeded:
          connected = true;
          continue;
        case HandshakeEvent::kDisconnected:
          continue;
        case HandshakeEvent::kRefusedKey:
          return PermissionError("the coordinator at " + endpoint_ +
                                 " refused this operator key: it is not in the coordinator's "
                                 "operator allowlist (see README: enrolling an operator)");
        case HandshakeEvent::kFailed:
          return PermissionError("CURVE handshake with " + endpoint_ +
                                 " failed: the coordinator's public key in TRAINLET_HOME does "
                                 "not match the server");
      }
    }
    if (items[0].revents & ZMQ_POLLIN) {
      auto reply = ReceiveFromDealer(socket_, drops_);
      if (!reply || reply->body_case() != v1::Envelope::kOperatorResponse) continue;
      v1::OperatorResponse r = std::move(*reply->mutable_operator_response());
      if (r.request_id() != id) continue;  // a late answer to an earlier call
      if (!r.error().empty()) {
        static const std::map<std::string, ErrorCode> kCodes = {
            {"NotFound", ErrorCode::kNotFound},
            {"Invalid", ErrorCode::kInvalid},
            {"AlreadyExists", ErrorCode::kExists},
            {"Unavailable", ErrorCode::kUnavailable},
            {"PermissionDenied", ErrorCode::kPermission}};
        auto it = kCodes.find(r.error_code());
        return Status(it == kCodes.end() ? ErrorCode::kInternal : it->second, r.error());
      }
      return r;
    }
  }
}

}  // namespace trainlet::cli
