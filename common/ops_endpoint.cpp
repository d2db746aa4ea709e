#include "common/ops_endpoint.h"

#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace trainlet {

OpsEndpoint::OpsEndpoint(std::unique_ptr<ServiceNotifier> notifier)
    : notifier_(std::move(notifier)) {}

OpsEndpoint::~OpsEndpoint() {
  if (watchdog_fd_ >= 0) close(watchdog_fd_);
  if (epoll_fd_ >= 0) close(epoll_fd_);
}

Result<std::unique_ptr<OpsEndpoint>> OpsEndpoint::Create(const std::string& metrics_address,
                                                         std::unique_ptr<ServiceNotifier> notifier,
                                                         bool best_effort) {
  std::unique_ptr<OpsEndpoint> ops(new OpsEndpoint(std::move(notifier)));
  ops->epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  if (ops->epoll_fd_ < 0) return InternalError(std::string("epoll_create1: ") + strerror(errno));
  auto add = [&](int fd) -> Status {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    if (epoll_ctl(ops->epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
      return InternalError(std::string("epoll_ctl: ") + strerror(errno));
    }
    return Status::Ok();
  };
  if (!metrics_address.empty()) {
    OpsEndpoint* self = ops.get();
    auto http = HttpEndpoint::Listen(metrics_address,
                                     [self](const std::string& p) { return self->Serve(p); });
    if (http.ok()) {
      ops->http_ = std::move(http).value();
      TRAINLET_RETURN_IF_ERROR(add(ops->http_->fd()));
    } else if (best_effort && http.status().code() == ErrorCode::kExists) {
      spdlog::warn("{}; serving no metrics (set metrics_address to choose another)",
                   http.status().message());
    } else {
      return http.status();
    }
  }
  const auto timeout = ops->notifier_->WatchdogTimeout();
  if (timeout.count() > 0) {
    ops->watchdog_fd_ = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (ops->watchdog_fd_ < 0) return InternalError(std::string("timerfd: ") + strerror(errno));
    // Half the timeout, as sd_watchdog_enabled(3) advises, so one late pet is not fatal.
    const int64_t half_us = std::max<int64_t>(1, timeout.count() / 2);
    itimerspec spec{};
    spec.it_interval.tv_sec = half_us / 1000000;
    spec.it_interval.tv_nsec = (half_us % 1000000) * 1000;
    spec.it_value = spec.it_interval;
    timerfd_settime(ops->watchdog_fd_, 0, &spec, nullptr);
    TRAINLET_RETURN_IF_ERROR(add(ops->watchdog_fd_));
  }
  return ops;
}

void OpsEndpoint::OnReadable() {
  epoll_event events[4];
  const int n = epoll_wait(epoll_fd_, events, 4, 0);
  for (int i = 0; i < n; ++i) {
    if (events[i].data.fd == watchdog_fd_) {
      uint64_t expirations = 0;
      if (read(watchdog_fd_, &expirations, sizeof expirations) > 0)
        notifier_->Notify("WATCHDOG=1", true);
    } else if (http_ && events[i].data.fd == http_->fd()) {
      http_->Handle();
    }
  }
}

HttpResponse OpsEndpoint::Serve(const std::string& path) {
  HttpResponse r;
  if (path == "/metrics") {
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
