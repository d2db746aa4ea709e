// HttpServer: the coordinator's HTTP stack (Debian's cpp-httplib, with OpenSSL for HTTPS), shaped
// for a daemon whose work all happens on one event loop. (The agent serves HTTP with its own
// event-driven server, agent/progress_https_server.h, and links none of this.)
//
// Threads. httplib parses requests on threads of its own: one that accepts, and a small pool that
// reads, writes and enforces the limits below. Those threads never touch the daemon's state. Each
// request they parse is queued, fd() becomes readable, and the loop calls Handle(), which runs the
// handler on the loop for every queued request and hands the answers back. A request whose answer
// does not come within Options::loop_timeout (a hung loop) gets 503 and is dropped from the
// queue. So the handler sees the daemon's state without a lock, and a hung loop is visible to a
// probe, as with the hand-written responder this replaces.
//
// Which thread calls what:
//   Start, fd, bound_address, the destructor: the owner's (loop) thread.
//   Handle, and through it the handler: the loop thread only.
//   Everything else runs inside this object, on httplib's threads.
//
// Limits httplib enforces before the loop sees anything: a body over Options::max_body_bytes is
// answered 413; a request line over 8 KiB 414; a client silent for Options::io_timeout is dropped.
// With TLS, a client that does not complete a TLS handshake (plain HTTP on the HTTPS port) is
// dropped without an answer.
//
// httplib.h is included by http_server.cpp only, so its users compile without it.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"

namespace trainlet {

struct HttpRequest {
  std::string method;         // "GET", "POST", ...
  std::string path;           // without the query string
  std::string authorization;  // the Authorization header, "" when absent
  std::string body;
  bool tls = false;  // it came over HTTPS
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // extra headers (Retry-After, ...)
};

// Called on the loop thread, once per request.
using HttpHandler = std::function<HttpResponse(const HttpRequest&)>;

class HttpServer {
 public:
  struct Options {
    // "host:port", "[v6-host]:port" or ":port" (every IPv4 interface). Port 0 lets the kernel
    // choose; bound_address() tells which.
    std::string address;
    // PEM files of the server's certificate (chain) and private key; both empty: plain HTTP.
    std::string tls_cert_file;
    std::string tls_key_file;
    size_t max_body_bytes = 64 * 1024;
    size_t threads = 2;  // httplib's pool: requests parsed at once
    // Off: one request per connection. httplib gives a kept-alive connection a pool thread until
    // it goes idle, so a few clients that keep theirs (a scraper, ranks posting every 100 ms)
    // would starve every other client, /healthz probes included.
    bool keep_alive = false;
    std::chrono::seconds io_timeout{5};
    std::chrono::seconds loop_timeout{5};
  };

  // Binds and starts httplib's threads. Errors name the address; a port already in use is
  // ErrorCode::kExists; unreadable TLS files are kInvalid.
  static Result<std::unique_ptr<HttpServer>> Start(const Options& options, HttpHandler handler);
  // Stops httplib's threads; requests still queued get 503.
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Readable while requests wait for Handle(). Owned by this object.
  int fd() const;
  // Answers every request waiting now, calling the handler on this (the loop's) thread.
  void Handle();
  // "127.0.0.1:9464", with the port the kernel chose.
  const std::string& bound_address() const;
  uint16_t port() const;

 private:
  struct Impl;
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Splits "host:port", "[v6]:port" or ":port" (host "" then). Invalid naming the address otherwise.
// Defined in host_port.cpp (library trainlet_ops), so it links without httplib.
Result<std::pair<std::string, uint16_t>> SplitHostPort(const std::string& address);

}  // namespace trainlet
