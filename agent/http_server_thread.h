// HttpServerThread: a ProgressHttpsServer served on a thread of its own, which sleeps in
// epoll_wait on the server's own set (ProgressHttpsServer::Wait: accept, TLS, read, the handler,
// write) until the destructor interrupts it.
//
// Why a thread (bench/progress, issue 15): served on the agent's loop, each of 64 ranks' posts
// every 100 ms woke the loop's zmq_poll (two poll(2) passes, ZMQ_EVENTS and a getpid per ZeroMQ
// socket, the loop's ticks): about 40-50 us per post on top of the ~60-90 us the post itself
// costs. Here a post wakes only this thread; the loop hears of posts once per report batch
// (ProgressEndpoint::fd()).
//
// Ownership: takes the server; the thread is its only caller from Start until the destructor has
// joined it, which then destroys the server (its connections close). The handler runs on this
// thread, so whatever it touches must be safe to touch from here (ProgressEndpoint locks).
// Stack: kStackBytes, not glibc's 8 MiB (only touched pages count in RSS either way, but the
// mapping stays small); the thread blocks every signal, so the agent's signalfd sees them all.
// In a stream of requests (woken after waiting less than kStreamGap since its last rest) the
// thread rests `gather` after serving before it looks again, so that one wake-up answers the
// requests of several connections: each wake-up is a context switch, a sleep and an epoll_wait,
// which bench/progress measured as the largest cost it can cut at 64 ranks posting every 100 ms
// (about 90 us per wake-up on a 2-core VM: 10 ms -> 20 ms took the agent from ~2.0% to ~1.5% of
// a core on a loaded host; with the posters at their full rate, 20 -> 30 ms took ~10% off the
// cost per post, which the 2% target needs on a quiet host). A request in such a stream waits at
// most `gather` longer for its answer (on average half of it); a lone request (a rank posting
// every few seconds) waits for nothing. The agent's config key progress_gather_ms sets it
// (kDefaultGather); 0: no rest, every request answered at once, one wake-up each.
// An idle server thread makes no allocation (no malloc arena of its own until the first
// connection) and no wake-up: the server's idle sweep timer exists only while connections do.
#pragma once

#include <pthread.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "agent/progress_https_server.h"
#include "common/status.h"

namespace trainlet::agent {

class HttpServerThread {
 public:
  // OpenSSL's handshake, a 16 KiB read buffer and the JSON body parser stay well inside this.
  static constexpr size_t kStackBytes = 256 * 1024;
  static constexpr std::chrono::milliseconds kDefaultGather{30};
  static constexpr std::chrono::milliseconds kStreamGap{50};

  // Starts serving `server` on a new thread named `name` (at most 15 characters, for top -H and
  // perf), resting `gather` between wake-ups in a stream (0: never). kInternal when the thread
  // cannot be made; the server is then destroyed.
  static Result<std::unique_ptr<HttpServerThread>> Start(
      std::unique_ptr<ProgressHttpsServer> server, const char* name,
      std::chrono::milliseconds gather = kDefaultGather);
  // Stops the thread (a request being answered is finished first; a rest, at most `gather`), joins
  // it, then destroys the server. Any thread but the server's own (a handler must not destroy its
  // server).
  ~HttpServerThread();
  HttpServerThread(const HttpServerThread&) = delete;
  HttpServerThread& operator=(const HttpServerThread&) = delete;

  // Constant after Start: any thread.
  uint16_t port() const { return port_; }
  // How many times the thread woke to serve (for tests of the gathering); any thread.
  uint64_t wakeups() const { return wakeups_.load(std::memory_order_relaxed); }

 private:
  HttpServerThread(std::unique_ptr<ProgressHttpsServer> server, std::chrono::milliseconds gather);
  static void* Main(void* self);
  void Serve();

  // Touched only by the thread between Start and the join.
  std::unique_ptr<ProgressHttpsServer> server_;
  // Constant after Start.
  const uint16_t port_;
  const std::chrono::milliseconds gather_;
  pthread_t thread_{};
  bool joinable_ = false;  // the thread was made
  std::atomic<uint64_t> wakeups_{0};
};

}  // namespace trainlet::agent
