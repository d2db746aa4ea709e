#include "common/zmq_sockets.h"

#include <spdlog/spdlog.h>

#include <vector>

namespace trainlet {
namespace {

// Reads every frame of the next message, keeping at most `max_frames`; the rest are discarded so
// a peer cannot make us hold an unbounded message. Returns false when nothing was waiting.
bool ReadFrames(zmq::socket_t& s, size_t max_frames, std::vector<zmq::message_t>& frames,
                bool& too_many) {
  frames.clear();
  too_many = false;
  while (true) {
    zmq::message_t m;
    if (!s.recv(m, zmq::recv_flags::dontwait)) return !frames.empty();
    const bool more = m.more();
    if (frames.size() < max_frames) {
      frames.push_back(std::move(m));
    } else {
      too_many = true;
    }
    if (!more) return true;
  }
}

void SetCommon(zmq::socket_t& s) {
  s.set(zmq::sockopt::linger, 0);
  s.set(zmq::sockopt::maxmsgsize, static_cast<int64_t>(kMaxMessageBytes));
}

}  // namespace

Result<zmq::socket_t> BindCurveRouter(zmq::context_t& ctx, const std::string& endpoint,
                                      const CurveKeyPair& server_keys,
                                      const std::string& zap_domain, std::string* bound) {
  try {
    zmq::socket_t s(ctx, zmq::socket_type::router);
    SetCommon(s);
    s.set(zmq::sockopt::backlog, 4096);
    s.set(zmq::sockopt::router_mandatory, 1);
    s.set(zmq::sockopt::curve_server, 1);
    s.set(zmq::sockopt::curve_secretkey, server_keys.secret_z85);
    s.set(zmq::sockopt::zap_domain, zap_domain);
    int enforce = 1;
    if (zmq_setsockopt(s.handle(), kZmqZapEnforceDomain, &enforce, sizeof enforce) != 0) {
      return InternalError(std::string("cannot enforce the ZAP domain: ") +
                           zmq_strerror(zmq_errno()));
    }
    s.bind(endpoint);
    if (bound != nullptr) *bound = s.get(zmq::sockopt::last_endpoint);
    return s;
  } catch (const zmq::error_t& e) {
    return UnavailableError("cannot listen on " + endpoint + ": " + e.what());
  }
}

Result<zmq::socket_t> ConnectCurveDealer(zmq::context_t& ctx, const std::string& endpoint,
                                         const std::string& server_public_z85,
                                         const CurveKeyPair& client_keys) {
  try {
    zmq::socket_t s(ctx, zmq::socket_type::dealer);
    SetCommon(s);
    s.set(zmq::sockopt::immediate, 1);
    s.set(zmq::sockopt::reconnect_ivl, 100);
    s.set(zmq::sockopt::reconnect_ivl_max, 2000);
    s.set(zmq::sockopt::curve_serverkey, server_public_z85);
    s.set(zmq::sockopt::curve_publickey, client_keys.public_z85);
    s.set(zmq::sockopt::curve_secretkey, client_keys.secret_z85);
    s.connect(endpoint);
    return s;
  } catch (const zmq::error_t& e) {
    return InvalidError("cannot connect to " + endpoint + ": " + e.what());
  }
}

std::optional<RouterMessage> ReceiveFromRouter(zmq::socket_t& router, DropCounters& drops) {
  std::vector<zmq::message_t> frames;
  bool too_many = false;
  try {
    if (!ReadFrames(router, 2, frames, too_many)) return std::nullopt;
  } catch (const zmq::error_t& e) {
    spdlog::warn("receive failed: {}", e.what());
    return std::nullopt;
  }
  if (too_many || frames.size() != 2) {
    drops.Add(DropReason::kTooManyFrames);
    spdlog::warn("dropped a message with the wrong number of frames");
    return std::nullopt;
  }
  RouterMessage out;
  out.routing_id = frames[0].to_string();
  const char* uid = frames[1].gets("User-Id");
  out.user_id = uid != nullptr ? uid : "";
  if (auto err = DecodeEnvelope(frames[1].data(), frames[1].size(), out.envelope)) {
    drops.Add(err->reason);
    spdlog::warn("dropped a message from {}: {}", out.user_id, err->detail);
    return std::nullopt;
  }
  return out;
}

std::optional<v1::Envelope> ReceiveFromDealer(zmq::socket_t& dealer, DropCounters& drops) {
  std::vector<zmq::message_t> frames;
  bool too_many = false;
  try {
    if (!ReadFrames(dealer, 1, frames, too_many)) return std::nullopt;
  } catch (const zmq::error_t& e) {
    spdlog::warn("receive failed: {}", e.what());
    return std::nullopt;
  }
  if (too_many || frames.size() != 1) {
    drops.Add(DropReason::kTooManyFrames);
    return std::nullopt;
  }
  v1::Envelope env;
  if (auto err = DecodeEnvelope(frames[0].data(), frames[0].size(), env)) {
    drops.Add(err->reason);
    spdlog::warn("dropped a message: {}", err->detail);
    return std::nullopt;
  }
  return env;
}

bool SendToRouterPeer(zmq::socket_t& router, const std::string& routing_id, v1::Envelope& env) {
  const std::string bytes = EncodeEnvelope(env);
  try {
    if (!router.send(zmq::buffer(routing_id),
                     zmq::send_flags::sndmore | zmq::send_flags::dontwait)) {
      return false;
    }
    return router.send(zmq::buffer(bytes), zmq::send_flags::dontwait).has_value();
  } catch (const zmq::error_t& e) {
    // EHOSTUNREACH with ROUTER_MANDATORY: the peer is gone.
    spdlog::debug("send to a peer failed: {}", e.what());
    return false;
  }
}

bool SendOnDealer(zmq::socket_t& dealer, v1::Envelope& env) {
  const std::string bytes = EncodeEnvelope(env);
  try {
    return dealer.send(zmq::buffer(bytes), zmq::send_flags::dontwait).has_value();
  } catch (const zmq::error_t& e) {
    spdlog::debug("send failed: {}", e.what());
    return false;
  }
}

std::vector<std::string> SplitEndpointList(const std::string& list) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    if (comma == std::string::npos) comma = list.size();
    const std::string item = list.substr(start, comma - start);
    const size_t b = item.find_first_not_of(" \t");
    if (b != std::string::npos) out.push_back(item.substr(b, item.find_last_not_of(" \t") - b + 1));
    start = comma + 1;
  }
  return out;
}

}  // namespace trainlet
