// OpsEndpoint: a daemon's operations surface, in one fd its event loop polls.
//
//  - HTTP on the configured metrics address: /metrics (Prometheus text format 0.0.4), /healthz
//    (200 whenever the loop answers: a hung loop answers nothing and the probe times out) and
//    /readyz (200 when the daemon's ready check passes, else 503).
//  - The service manager (ServiceNotifier): READY=1 once, STATUS= lines when they change,
//    WATCHDOG=1 every half WATCHDOG_USEC, STOPPING=1.
//
// The watchdog is petted from OnReadable(), which only the loop calls: if the loop hangs, the
// pets stop and the service manager restarts the daemon. That is the point, so never move it to
// a thread.
//
// fd() is a PollSet (platform/poll_set.h) holding the HTTP server's fd and a watchdog timer; poll
// it for POLLIN and call OnReadable() when it is readable. Owned by one loop; no locks here.
//
// Which HTTP server: the caller's OpsHttpStarter. The coordinator's is Debian's cpp-httplib
// (http/http_server.h: httplib's threads parse, the loop answers), the default of the three-
// argument Create, which is built into trainlet_http. The agent passes its own event-driven
// server (agent/agent_ops.cpp), so the agent links no httplib (issue 15: one HTTP stack per
// agent, and ~6 MB of idle RSS that libcpp-httplib.so and its libraries cost).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "common/http/http_server.h"
#include "common/metrics.h"
#include "common/platform/periodic_timer.h"
#include "common/platform/poll_set.h"
#include "common/status.h"
#include "common/systemd_notify.h"

namespace trainlet {

// An HTTP server that answers on the loop that polls fd(). Owned by the OpsEndpoint.
class OpsHttpServer {
 public:
  virtual ~OpsHttpServer() = default;
  virtual int fd() const = 0;     // readable while OnReadable has work
  virtual void OnReadable() = 0;  // reads, calls the handler, writes; on the loop only
  // "127.0.0.1:9464", with the port the kernel chose for :0.
  virtual std::string bound_address() const = 0;
};
// Binds `address` ("host:port", "[v6]:port" or ":port") and answers with `handler` (bodies over
// max_body_bytes get 413). Errors name the address; a port in use is ErrorCode::kExists.
using OpsHttpStarter = std::function<Result<std::unique_ptr<OpsHttpServer>>(
    const std::string& address, size_t max_body_bytes, HttpHandler handler)>;

class OpsEndpoint {
 public:
  // metrics_address "" serves no HTTP (the notifier still works). Errors name the address.
  // best_effort: a port already in use is logged and HTTP is left off, rather than an error.
  // Daemons pass it for their built-in default address, so several of them (a local cluster)
  // can share a host; an address the operator chose must work or the daemon does not start.
  // HTTP by cpp-httplib (HttpServer); defined in trainlet_http.
  static Result<std::unique_ptr<OpsEndpoint>> Create(const std::string& metrics_address,
                                                     std::unique_ptr<ServiceNotifier> notifier,
                                                     bool best_effort = false);
  // HTTP by the server `start` makes; trainlet_ops alone, no httplib.
  static Result<std::unique_ptr<OpsEndpoint>> Create(const std::string& metrics_address,
                                                     std::unique_ptr<ServiceNotifier> notifier,
                                                     bool best_effort, const OpsHttpStarter& start);
  ~OpsEndpoint();
  OpsEndpoint(const OpsEndpoint&) = delete;
  OpsEndpoint& operator=(const OpsEndpoint&) = delete;

  int fd() const { return poll_set_->fd(); }
  void OnReadable();

  MetricsRegistry& metrics() { return metrics_; }
  // /readyz answers 200 while this returns true. Default: never ready.
  void SetReadyCheck(std::function<bool()> ready) { ready_ = std::move(ready); }
  // The bound "host:port" (port chosen by the kernel for :0); "" when HTTP is off.
  std::string metrics_address() const { return http_ ? http_->bound_address() : ""; }

  // READY=1 with a status line, once; later calls only update the status.
  void NotifyReady(const std::string& status);
  // STATUS=<line>, sent only when it differs from the last one.
  void NotifyStatus(const std::string& status);
  void NotifyStopping();

 private:
  explicit OpsEndpoint(std::unique_ptr<ServiceNotifier> notifier);
  HttpResponse Serve(const HttpRequest& request);

  // Constant after Create.
  std::unique_ptr<ServiceNotifier> notifier_;
  std::unique_ptr<OpsHttpServer> http_;
  std::unique_ptr<platform::PollSet> poll_set_;
  std::unique_ptr<platform::PeriodicTimer> watchdog_;  // null without a watchdog
  // Owned by the loop.
  MetricsRegistry metrics_;
  std::function<bool()> ready_;
  bool ready_sent_ = false;
  std::string last_status_;
};

}  // namespace trainlet
