// A tiny HTTP/1.0 responder for /metrics, /healthz and /readyz, driven by the daemon's own event
// loop: no threads, and nothing it does blocks.
//
// Every socket is non-blocking and sits in one PollSet (platform/poll_set.h) whose fd the loop
// polls (fd()). When it is readable the loop calls Handle(), which accepts, reads request heads,
// answers and closes.
// One request per connection ("Connection: close"); only GET and HEAD.
//
// Bounds, so a slow or hostile client cannot hurt the loop: a request head larger than
// kMaxRequestBytes is answered 431 and closed; at most kMaxConnections are open, and accepting
// one more closes the oldest; a connection older than kConnectionTimeout is closed the next time
// Handle() runs.
//
// Owned by one loop; no locks.
#pragma once

#include <chrono>
#include <functional>
#include <list>
#include <memory>
#include <string>

#include "common/platform/poll_set.h"
#include "common/status.h"

namespace trainlet {

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

// Called on the loop with the request path (query string removed).
using HttpHandler = std::function<HttpResponse(const std::string& path)>;

class HttpEndpoint {
 public:
  static constexpr size_t kMaxRequestBytes = 8192;
  static constexpr size_t kMaxConnections = 32;
  static constexpr std::chrono::seconds kConnectionTimeout{5};

  // address: "host:port", "[v6-host]:port" or ":port" (every interface). Port 0 lets the kernel
  // choose; bound_address() tells which. Errors name the address; a port already in use is
  // ErrorCode::kExists.
  static Result<std::unique_ptr<HttpEndpoint>> Listen(const std::string& address,
                                                      HttpHandler handler);
  ~HttpEndpoint();
  HttpEndpoint(const HttpEndpoint&) = delete;
  HttpEndpoint& operator=(const HttpEndpoint&) = delete;

  // Readable when Handle() has work. Owned by this object.
  int fd() const { return poll_set_->fd(); }
  // Does all the work that is ready now, without blocking.
  void Handle();
  // "127.0.0.1:9464", with the port the kernel chose.
  const std::string& bound_address() const { return bound_address_; }

 private:
  struct Connection {
    int fd = -1;
    std::string in;
    std::string out;
    size_t written = 0;
    std::chrono::steady_clock::time_point opened;
  };
  HttpEndpoint(HttpHandler handler) : handler_(std::move(handler)) {}
  void Accept();
  void OnReadable(Connection& c);  // may switch c to writing
  void Respond(Connection& c, int status, const std::string& content_type, std::string body,
               bool head);
  bool Write(Connection& c);  // true when done
  void Close(std::list<Connection>::iterator it);

  // Constant after Listen.
  HttpHandler handler_;
  std::string bound_address_;
  int listen_fd_ = -1;
  std::unique_ptr<platform::PollSet> poll_set_;
  // Owned by the loop; oldest first.
  std::list<Connection> connections_;
};

}  // namespace trainlet
