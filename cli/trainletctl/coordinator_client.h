// A synchronous client of the coordinator's operator endpoint, for trainletctl.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <zmq.hpp>

#include "common/curve_keys.h"
#include "common/envelope.h"
#include "common/handshake_monitor.h"
#include "trainletctl/client_config.h"

namespace trainlet::cli {

class CoordinatorClient {
 public:
  static Result<std::unique_ptr<CoordinatorClient>> Connect(const ClientConfig& config);

  // Sends one request and waits up to `timeout` for its answer. A refused CURVE handshake is
  // reported as a PermissionError at once, rather than as a timeout, and so is a connection cut
  // after the request went out (Unavailable, saying "response too large": the socket cuts a peer
  // whose message is over kMaxMessageBytes). An answer carrying an error is returned as that
  // error.
  Result<v1::OperatorResponse> Call(v1::OperatorRequest request,
                                    std::chrono::milliseconds timeout = std::chrono::seconds(15));

 private:
  CoordinatorClient() = default;
  // The handshake monitor's news: OK, with *connected set once it succeeded and cleared when the
  // connection dropped; PermissionError when the coordinator refused the key or the handshake
  // failed.
  Status OnHandshakeEvent(bool* connected);
  // The answer to request `id` when the message waiting on the socket is it; nullopt for anything
  // else (an earlier call's late answer, a dropped message).
  std::optional<Result<v1::OperatorResponse>> ReadReply(uint64_t id);
  zmq::context_t ctx_;
  zmq::socket_t socket_;
  HandshakeMonitor monitor_;
  std::string endpoint_;
  uint64_t next_id_ = 1;
  DropCounters drops_;
};

}  // namespace trainlet::cli
