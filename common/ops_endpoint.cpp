#include "common/ops_endpoint.h"

#include <spdlog/spdlog.h>

#include <cstring>

namespace trainlet {

OpsEndpoint::OpsEndpoint(std::unique_ptr<ServiceNotifier> notifier)
    : notifier_(std::move(notifier)) {}

OpsEndpoint::~OpsEndpoint() = default;

Result<std::unique_ptr<OpsEndpoint>> OpsEndpoint::Create(const std::string& metrics_address,
                                                         std::unique_ptr<ServiceNotifier> notifier,
                                                         bool best_effort,
                                                         const OpsHttpStarter& start) {
  std::unique_ptr<OpsEndpoint> ops(new OpsEndpoint(std::move(notifier)));
  TRAINLET_ASSIGN_OR_RETURN(ops->poll_set_, platform::PollSet::Open());
  // Tags: the watchdog's is its timer, HTTP's the endpoint.
  auto add = [&](int fd, void* tag) -> Status {
    if (const int err = ops->poll_set_->Add(fd, platform::PollSet::kReadable, tag); err != 0) {
      return InternalError(std::string("adding to the ops poll set: ") + strerror(err));
    }
    return Status::Ok();
  };
  if (!metrics_address.empty()) {
    OpsEndpoint* self = ops.get();
    // GET and HEAD only: 8 KiB is plenty of body to read.
    auto http =
        start(metrics_address, 8192, [self](const HttpRequest& r) { return self->Serve(r); });
    if (!http.ok()) {  // "metrics address "...": why", as the daemons have always said
      http = Status(http.status().code(), "metrics " + http.status().message());
    }
    if (http.ok()) {
      ops->http_ = std::move(http).value();
      TRAINLET_RETURN_IF_ERROR(add(ops->http_->fd(), ops->http_.get()));
    } else if (best_effort && http.status().code() == ErrorCode::kExists) {
      spdlog::warn("{}; serving no metrics (set metrics_address to choose another)",
                   http.status().message());
    } else {
      return http.status();
    }
  }
  const auto timeout = ops->notifier_->WatchdogTimeout();
  if (timeout.count() > 0) {
    // Half the timeout, as sd_watchdog_enabled(3) advises, so one late pet is not fatal.
    auto watchdog = platform::PeriodicTimer::Open(timeout / 2);
    if (!watchdog.ok()) return InternalError("watchdog: " + watchdog.status().message());
    ops->watchdog_ = std::move(watchdog).value();
    TRAINLET_RETURN_IF_ERROR(add(ops->watchdog_->fd(), ops->watchdog_.get()));
  }
  return ops;
}

void OpsEndpoint::OnReadable() {
  for (const auto& ready : poll_set_->Ready(4)) {
    if (watchdog_ && ready.tag == watchdog_.get()) {
      if (watchdog_->Consume()) notifier_->Notify("WATCHDOG=1", true);
    } else if (http_ && ready.tag == http_.get()) {
      http_->OnReadable();
    }
  }
}

HttpResponse OpsEndpoint::Serve(const HttpRequest& request) {
  HttpResponse r;
  const std::string& path = request.path;
  if (request.method != "GET" && request.method != "HEAD") {
    r.status = 405;
    r.body = "only GET and HEAD\n";
  } else if (path == "/metrics") {
    r.content_type = "text/plain; version=0.0.4; charset=utf-8";
    r.body = metrics_.Render();
  } else if (path == "/healthz") {
    r.body = "ok\n";  // answered by the loop itself, so an answer means it is alive
  } else if (path == "/readyz") {
    const bool ready = ready_ && ready_();
    r.status = ready ? 200 : 503;
    r.body = ready ? "ready\n" : "not ready\n";
  } else {
    r.status = 404;
    r.body = "not found: try /metrics, /healthz or /readyz\n";
  }
  return r;
}

void OpsEndpoint::NotifyReady(const std::string& status) {
  if (!ready_sent_) {
    ready_sent_ = true;
    last_status_ = status;
    notifier_->Notify("READY=1\nSTATUS=" + status);
    return;
  }
  NotifyStatus(status);
}

void OpsEndpoint::NotifyStatus(const std::string& status) {
  if (status == last_status_) return;
  last_status_ = status;
  notifier_->Notify("STATUS=" + status, true);
}

void OpsEndpoint::NotifyStopping() { notifier_->Notify("STOPPING=1\nSTATUS=stopping"); }

}  // namespace trainlet
