// Socket setup shared by the daemons and the CLI: CURVE everywhere, caps on what a peer can make
// us hold, and receive helpers that enforce the one-envelope-per-message rule.
#pragma once

#include <optional>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "common/curve_keys.h"
#include "common/envelope.h"

namespace trainlet {

// ZMQ_ZAP_ENFORCE_DOMAIN sits behind the draft API in Debian's zmq.h; without it a CURVE server
// with a ZAP handler still admits clients on a domain nobody handles.
inline constexpr int kZmqZapEnforceDomain = 93;

// A ROUTER that is a CURVE server for `zap_domain`, bound to `endpoint` ("tcp://127.0.0.1:0"
// picks a free port). Returns the socket; `bound` receives the resolved endpoint.
Result<zmq::socket_t> BindCurveRouter(zmq::context_t& ctx, const std::string& endpoint,
                                      const CurveKeyPair& server_keys,
                                      const std::string& zap_domain, std::string* bound);

// A list of endpoints as config gives it ("tcp://a:7070, tcp://b:7070"): split at commas,
// blanks around each trimmed, empty items dropped. A single endpoint is a list of one.
std::vector<std::string> SplitEndpointList(const std::string& list);

// A DEALER that is a CURVE client of the server with `server_public_z85`.
// ZMQ_IMMEDIATE is set so nothing queues for a peer that is not connected (stale heartbeats).
Result<zmq::socket_t> ConnectCurveDealer(zmq::context_t& ctx, const std::string& endpoint,
                                         const std::string& server_public_z85,
                                         const CurveKeyPair& client_keys);

// A message received on a ROUTER: the peer's routing id, its authenticated CURVE public key
// (the ZAP User-Id, never something the peer chose) and the decoded envelope.
struct RouterMessage {
  std::string routing_id;
  std::string user_id;
  v1::Envelope envelope;
};

// Reads one message without blocking. Returns nullopt when nothing is waiting or when the message
// was dropped (then `drops` is incremented and the reason logged).
std::optional<RouterMessage> ReceiveFromRouter(zmq::socket_t& router, DropCounters& drops);
std::optional<v1::Envelope> ReceiveFromDealer(zmq::socket_t& dealer, DropCounters& drops);

// Sends without blocking. Returns false when the message could not be queued (peer gone).
bool SendToRouterPeer(zmq::socket_t& router, const std::string& routing_id, v1::Envelope& env);
bool SendOnDealer(zmq::socket_t& dealer, v1::Envelope& env);

}  // namespace trainlet
