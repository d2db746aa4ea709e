// wire_garbage: sends malformed traffic to a trainlet endpoint over an authenticated CURVE
// connection, as a hostile but enrolled peer would: random bytes, empty and truncated
// envelopes, wrong types, extra frames and an oversized frame.
//
//   wire_garbage ENDPOINT SERVER_PUBLIC_KEY_FILE CLIENT_KEY_FILE [COUNT]
// Exits 0 once everything was sent; the test then checks that the daemon still answers.
#include <chrono>
#include <cstdio>
#include <random>
#include <thread>
#include <zmq.hpp>

#include "common/curve_keys.h"
#include "common/envelope.h"
#include "common/zmq_sockets.h"

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s ENDPOINT SERVER_PUBLIC_KEY_FILE CLIENT_KEY_FILE [COUNT]\n",
                 argv[0]);
    return 2;
  }
  auto server = trainlet::ReadKeyPair(argv[2]);
  auto client = trainlet::ReadKeyPair(argv[3]);
  if (!server.ok() || !client.ok()) {
    std::fprintf(stderr, "wire_garbage: cannot read keys\n");
    return 2;
  }
  const int count = argc > 4 ? std::atoi(argv[4]) : 200;
  zmq::context_t ctx;
  auto sock = trainlet::ConnectCurveDealer(ctx, argv[1], server->public_z85, *client);
  if (!sock.ok()) return 2;
  zmq::socket_t& s = *sock;
  s.set(zmq::sockopt::immediate, 0);  // queue while the handshake completes
  std::mt19937 rng(42);
  auto bytes = [&](size_t n) {
    std::string b(n, '\0');
    for (auto& c : b) c = static_cast<char>(rng());
    return b;
  };
  trainlet::v1::Envelope valid;
  valid.mutable_operator_request()->mutable_get_nodes();
  const std::string good = trainlet::EncodeEnvelope(valid);
  int sent = 0;
  for (int i = 0; i < count; ++i) {
    switch (i % 7) {
      case 0:
        s.send(zmq::buffer(bytes(1 + rng() % 512)), zmq::send_flags::none);
        break;
      case 1:
        s.send(zmq::message_t(), zmq::send_flags::none);
        break;  // empty envelope
      case 2:
        s.send(zmq::buffer(good.substr(0, good.size() / 2)), zmq::send_flags::none);
        break;
      case 3: {  // a valid envelope whose type lies about its body
        trainlet::v1::Envelope e = valid;
        e.set_type(trainlet::v1::MESSAGE_TYPE_LAUNCH_PLAN);
        std::string raw;
        e.SerializeToString(&raw);
        s.send(zmq::buffer(raw), zmq::send_flags::none);
        break;
      }
      case 4:  // three frames where one is allowed
        s.send(zmq::buffer(good), zmq::send_flags::sndmore);
        s.send(zmq::buffer(good), zmq::send_flags::sndmore);
        s.send(zmq::buffer(good), zmq::send_flags::none);
        break;
      case 5: {  // a message this endpoint must not accept from this peer
        trainlet::v1::Envelope e;
        e.mutable_launch_plan()->set_job("evil");
        e.mutable_launch_plan()->add_workers()->add_argv("/bin/false");
        s.send(zmq::buffer(trainlet::EncodeEnvelope(e)), zmq::send_flags::none);
        break;
      }
      case 6:
        s.send(zmq::buffer(bytes(64)), zmq::send_flags::none);
        break;
    }
    ++sent;
  }
  // Last, one frame over the cap: libzmq drops the connection on it.
  s.send(zmq::buffer(std::string(trainlet::kMaxMessageBytes + 1024, 'x')), zmq::send_flags::none);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  std::printf("sent %d malformed messages and one oversized frame\n", sent);
  return 0;
}
