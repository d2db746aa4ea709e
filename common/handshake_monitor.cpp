#include "common/handshake_monitor.h"

#include <cstdint>
#include <cstring>

namespace trainlet {

HandshakeMonitor::HandshakeMonitor(zmq::context_t& ctx, zmq::socket_t& socket,
                                   const std::string& name, bool connect_retries) {
  const std::string endpoint = "inproc://" + name;
  const int events = ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH |
                     ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL | ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL |
                     ZMQ_EVENT_DISCONNECTED | (connect_retries ? ZMQ_EVENT_CONNECT_RETRIED : 0);
  if (zmq_socket_monitor(socket.handle(), endpoint.c_str(), events) != 0) return;
  monitor_ = zmq::socket_t(ctx, zmq::socket_type::pair);
  monitor_.set(zmq::sockopt::linger, 0);
  monitor_.connect(endpoint);
}

std::optional<HandshakeEvent> HandshakeMonitor::Read() {
  if (monitor_.handle() == nullptr) return std::nullopt;
  while (true) {
    zmq::message_t event;
    if (!monitor_.recv(event, zmq::recv_flags::dontwait)) return std::nullopt;
    zmq::message_t address;  // every event is two frames: id + value, then the peer's address
    if (event.more()) (void)monitor_.recv(address);
    uint16_t what = 0;
    if (event.size() >= 2) std::memcpy(&what, event.data(), 2);
    switch (what) {
      case ZMQ_EVENT_HANDSHAKE_SUCCEEDED:
        return HandshakeEvent::kSucceeded;
      case ZMQ_EVENT_HANDSHAKE_FAILED_AUTH:
        return HandshakeEvent::kRefusedKey;
      case ZMQ_EVENT_DISCONNECTED:
        return HandshakeEvent::kDisconnected;
      case ZMQ_EVENT_CONNECT_RETRIED:
        return HandshakeEvent::kConnectRetried;
      case ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL:
      case ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL:
        return HandshakeEvent::kFailed;
      default:
        continue;  // not subscribed; skip
    }
  }
}

}  // namespace trainlet
