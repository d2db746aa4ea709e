// Watches a CURVE client socket's handshakes through libzmq's socket monitor, so a client acts the
// moment its connection is usable (send a request, register) and tells a refused key apart from
// a server that is not there.
#pragma once

#include <optional>
#include <string>
#include <zmq.hpp>

namespace trainlet {

enum class HandshakeEvent {
  kSucceeded,       // the CURVE handshake completed: sends on the socket now go out
  kRefusedKey,      // the server's ZAP handler refused our public key (not on its allowlist)
  kFailed,          // any other handshake failure: wrong server key, protocol mismatch
  kDisconnected,    // an established connection closed; libzmq reconnects by itself
  kConnectRetried,  // a connection attempt failed (refused, unreachable): libzmq tries again
                    // (only with `connect_retries`)
};

class HandshakeMonitor {
 public:
  HandshakeMonitor() = default;
  // Starts monitoring `socket`. `name` must be unique within `ctx` (it names an inproc endpoint).
  // When libzmq refuses the monitor the object stays inert: handle() is null, Read() nullopt.
  // `connect_retries`: also report each failed connection attempt (kConnectRetried), about one
  // per reconnect interval while nothing listens; off for daemons, which wait anyway.
  HandshakeMonitor(zmq::context_t& ctx, zmq::socket_t& socket, const std::string& name,
                   bool connect_retries = false);

  // The socket to add to a zmq_poll set (ZMQ_POLLIN); null when inert.
  void* handle() { return monitor_.handle(); }
  // One pending event, without blocking; nullopt when none is waiting.
  std::optional<HandshakeEvent> Read();

 private:
  zmq::socket_t monitor_;
};

}  // namespace trainlet
