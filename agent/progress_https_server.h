// ProgressHttpsServer: the agent's HTTP/1.1 server, driven by one thread (see Threads below):
// HTTPS under ProgressEndpoint (on its HttpServerThread), and plain HTTP (Options::tls false)
// under the agent's /metrics (agent_ops.cpp, on the agent's loop).
// (Named for its first use; it is the agent's one HTTP stack.)
//
// Why not HttpServer (common/http, Debian's cpp-httplib): bench/progress measured 9-12% of a core
// per agent at 64 ranks posting every 100 ms, kept-alive or not. httplib 0.11 gives each
// connection a pool thread for its whole life and, between requests, wakes that thread every
// ~11 ms (select with a 10 ms timeout, then a 1 ms sleep) to see whether the next request came;
// without keep-alive every post costs a full TLS handshake instead. Here a kept-alive connection
// is a socket in an epoll set and an OpenSSL object: no thread, and no wake-up until the client
// sends. A post costs one epoll wake-up, one TLS record each way and the handler.
//
// What it enforces, as HttpServer did for this endpoint:
//   - a request head over 8 KiB: 431, closed; a body over max_body_bytes: 413, closed;
//   - chunked bodies (no Content-Length): 411, closed;
//   - a client that does not complete a TLS handshake (plain HTTP on this port): closed without
//     an answer;
//   - a connection with a partial request for io_timeout, or idle for idle_timeout: closed;
//   - at most max_connections open: the oldest idle one is closed to make room;
//   - a connection with more than max_unsent_bytes (256 KiB) of answers unwritten (a client
//     pipelining requests without reading the answers) is not read from, nor are the requests
//     already read answered, until the client has taken them.
// "Expect: 100-continue" gets its 100 at once (curl sends it for bodies over 1 KiB).
// TLS: 1.2 or 1.3, the server's certificate chain and key from PEM files; session tickets on
// (OpenSSL's default), so a client that reconnects with its session skips the full handshake.
// A connection keeps its two ~17 KiB record buffers while it posts (freeing them after every
// record, SSL_MODE_RELEASE_BUFFERS, cost four large malloc calls per post) and gives them back
// once idle for a second (the idle sweep): ~34 KiB per posting rank, none per idle one.
//
// With Options::tls false it serves plain HTTP instead, the same way: the agent's /metrics,
// /healthz and /readyz (agent_ops.cpp), so the agent has one HTTP stack and links no httplib.
// HEAD is answered with the head a GET would get, without the body.
//
// Threads: none of its own. Everything, the handler included, runs on the one thread that drives
// it (OnReadable or Wait): the agent's loop for /metrics (agent_ops.cpp), an HttpServerThread for
// the progress port. Start and the destructor run on the thread that owns it, never while another
// drives it; Interrupt, port() and fd() may be called from any thread.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/http/http_server.h"  // HttpRequest, HttpResponse, HttpHandler
#include "common/platform/periodic_timer.h"
#include "common/platform/poll_set.h"
#include "common/platform/wake_event.h"
#include "common/status.h"

typedef struct ssl_ctx_st SSL_CTX;

namespace trainlet::agent {

class ProgressHttpsServer {
 public:
  using Clock = std::chrono::steady_clock;
  struct Options {
    std::string host;           // "" for every IPv4 interface; an IPv6 address without brackets
    bool tls = true;            // false: plain HTTP, and the TLS fields below are unused
    uint16_t port = 0;          // 0: the kernel chooses; port() tells which
    std::string tls_cert_file;  // PEM: the server's certificate (chain)
    std::string tls_key_file;   // PEM: its private key
    size_t max_body_bytes = 64 * 1024;
    size_t max_connections = 1024;
    std::chrono::milliseconds io_timeout{5000};     // a partial request may wait this long
    std::chrono::milliseconds idle_timeout{60000};  // a kept-alive connection between requests
    // Answers a connection may have waiting unwritten before its requests are no longer read or
    // answered: a client that pipelines requests and never reads the answers must not grow the
    // agent. Tests lower it (0: one answer at a time) to reach that state with a few requests.
    size_t max_unsent_bytes = 256 * 1024;
    // Set: the TLS files are loaded at the first connection, after this has made sure they exist,
    // so an agent no rank has reported to touches no OpenSSL; an error there is logged and the
    // connection closed. Unset: they are loaded by Start.
    std::function<Status()> prepare_tls;
  };

  // Binds, listens and (without prepare_tls) loads the TLS files. Errors: a port in use is kExists;
  // another bind failure kUnavailable; unreadable or mismatched TLS files kInvalid; each names the
  // cause.
  static Result<std::unique_ptr<ProgressHttpsServer>> Start(const Options& options,
                                                            HttpHandler handler);
  ~ProgressHttpsServer();
  ProgressHttpsServer(const ProgressHttpsServer&) = delete;
  ProgressHttpsServer& operator=(const ProgressHttpsServer&) = delete;

  // Readable while a connection, the listener or the idle sweep wants OnReadable. Owned here.
  int fd() const { return poll_->fd(); }
  // Accepts, handshakes, reads, answers (calling the handler) and writes, without blocking.
  void OnReadable();
  // As OnReadable, after waiting up to `timeout_ms` (-1: without limit) for something to do, on
  // the server's own epoll set (one system call for a thread that serves nothing else). False,
  // having done nothing, once Interrupt was called.
  bool Wait(int timeout_ms);
  // Ends a Wait in progress, and every later one. Any thread.
  void Interrupt() { interrupt_->Notify(); }
  uint16_t port() const { return port_; }
  size_t connections() const { return connections_.size(); }
  // Bytes of answers not yet written, over every connection (for tests of the backlog cap).
  size_t unsent_bytes() const;

 private:
  struct Connection;
  ProgressHttpsServer(Options options, HttpHandler handler);
  bool Dispatch(const std::vector<platform::PollSet::Event>& ready);  // false: interrupted
  void Accept();
  bool TlsReady();            // loads the TLS files the first time (prepare_tls)
  void Drive(Connection& c);  // whatever the connection can do now
  bool Handshake(Connection& c);
  bool ReadRequests(Connection& c);
  bool AnswerRequests(Connection& c);
  bool Flush(Connection& c);
  // One read or write, TLS or plain: bytes (> 0), 0 for "not now" (wants_write set when the
  // socket must become writable), -1 when the client closed or the connection broke.
  ssize_t ReadSome(Connection& c, char* buf, size_t size);
  ssize_t WriteSome(Connection& c, const char* data, size_t size);
  void Answer(Connection& c, const HttpResponse& r, bool close, bool head_only = false);
  void Close(int fd);
  void Sweep(Clock::time_point now);
  void CloseOldestIdle();

  // Constant after Start.
  const Options options_;
  const HttpHandler handler_;
  SSL_CTX* ctx_ = nullptr;  // set by Start, or by the first connection with prepare_tls
  int listen_fd_ = -1;
  uint16_t port_ = 0;
  std::unique_ptr<platform::PollSet> poll_;
  std::unique_ptr<platform::WakeEvent> interrupt_;  // in poll_; never drained once notified
  // Owned by the loop.
  std::map<int, std::unique_ptr<Connection>> connections_;  // by socket
  std::unique_ptr<platform::PeriodicTimer> sweep_;          // only while connections are open
  Clock::time_point now_;  // read once per wake-up (Dispatch): the time of what it serves
};

}  // namespace trainlet::agent
