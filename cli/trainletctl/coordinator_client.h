// A synchronous client of the coordinator's operator endpoint, for trainletctl.
//
// Several coordinators (high availability): ClientConfig::coordinator may list several
// endpoints. A call goes to the first; an answer with error code NotLeader sends it to the
// leader that answer names (else to the next endpoint), and so does an endpoint that takes no
// connection within kConnectTimeout. A request is sent again elsewhere only when no coordinator
// can have acted on it (refused as NotLeader, or never sent), so an apply is never applied twice.
// A connection cut after the request went out is reported, not retried.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "common/curve_keys.h"
#include "common/envelope.h"
#include "common/handshake_monitor.h"
#include "trainletctl/client_config.h"

namespace trainlet::cli {

class CoordinatorClient {
 public:
  static Result<std::unique_ptr<CoordinatorClient>> Connect(const ClientConfig& config);

  // Sends one request and waits up to the config's request_timeout for its answer.
  Result<v1::OperatorResponse> Call(v1::OperatorRequest request);
  // Sends one request and waits up to `timeout` for its answer. A refused CURVE handshake is
  // reported as a PermissionError at once, rather than as a timeout, and so is a connection cut
  // after the request went out (Unavailable, saying "response too large": the socket cuts a peer
  // whose message is over kMaxMessageBytes). An answer carrying an error is returned as that
  // error.
  Result<v1::OperatorResponse> Call(v1::OperatorRequest request, std::chrono::milliseconds timeout);

  // With several endpoints: how long one may take to accept the connection before the next.
  static constexpr std::chrono::milliseconds kConnectTimeout{1500};
  // With one endpoint, never reached yet by this client: how long its connections may be refused
  // (nothing listens: the coordinator is down, or the address is wrong) before a call says so,
  // rather than waiting out the whole request timeout. A coordinator restarting within it is
  // waited for.
  static constexpr std::chrono::milliseconds kRefusedFor{3000};

 private:
  CoordinatorClient() = default;
  // Call on the endpoint connected now. With several endpoints, gives up with `moved_on_` set
  // when the connection is not up by `connect_by`, or the answer is NotLeader.
  Result<v1::OperatorResponse> CallOne(const std::string& bytes, uint64_t id,
                                       std::chrono::milliseconds timeout,
                                       std::chrono::steady_clock::time_point deadline,
                                       std::chrono::steady_clock::time_point connect_by);
  // Replaces the socket with one connected to `endpoint`.
  Status MoveTo(const std::string& endpoint);
  // The handshake monitor's news: OK, with *connected set once it succeeded and cleared when the
  // connection dropped; PermissionError when the coordinator refused the key, or when
  // kFailedHandshakesForWrongKey handshakes in a row failed. One failure is not enough: a server
  // with another key and a coordinator that stops mid-handshake (a restart) look the same to the
  // client, a connection closed during the handshake; only the wrong key fails every time.
  Status OnHandshakeEvent(bool* connected);
  static constexpr int kFailedHandshakesForWrongKey = 3;
  // The answer to request `id` when the message waiting on the socket is it; nullopt for anything
  // else (an earlier call's late answer, a dropped message).
  std::optional<Result<v1::OperatorResponse>> ReadReply(uint64_t id);
  zmq::context_t ctx_;
  zmq::socket_t socket_;
  HandshakeMonitor monitor_;
  std::string endpoint_;                // connected to now
  std::vector<std::string> endpoints_;  // as configured
  std::string server_public_;           // the coordinators' public key (one for all of them)
  CurveKeyPair keys_;                   // this operator's
  std::chrono::milliseconds request_timeout_{std::chrono::seconds(15)};  // Call's, from the config
  uint64_t connections_ = 0;  // sockets made after the first: names their monitors
  // Set by CallOne when the request may go elsewhere: "" for the next endpoint, else the leader
  // a NotLeader answer named.
  std::optional<std::string> moved_on_;
  bool refused_as_follower_ = false;  // the last CallOne's answer was NotLeader
  int failed_handshakes_ = 0;         // in a row, on this socket; a success clears it
  bool ever_connected_ = false;       // a handshake with any endpoint succeeded
  // The first failed connection attempt since the socket was made; cleared by a handshake.
  std::optional<std::chrono::steady_clock::time_point> refused_since_;
  uint64_t next_id_ = 1;
  DropCounters drops_;
};

}  // namespace trainlet::cli
