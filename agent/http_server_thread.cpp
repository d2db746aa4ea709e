#include "agent/http_server_thread.h"

#include <poll.h>
#include <signal.h>
#include <spdlog/spdlog.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>

namespace trainlet::agent {

HttpServerThread::HttpServerThread(std::unique_ptr<ProgressHttpsServer> server,
                                   std::unique_ptr<platform::WakeEvent> stop)
    : server_(std::move(server)), stop_(std::move(stop)), port_(server_->port()) {}

Result<std::unique_ptr<HttpServerThread>> HttpServerThread::Start(
    std::unique_ptr<ProgressHttpsServer> server, const char* name) {
  TRAINLET_CHECK(server != nullptr);
  TRAINLET_ASSIGN_OR_RETURN(auto stop, platform::WakeEvent::Open());
  std::unique_ptr<HttpServerThread> t(new HttpServerThread(std::move(server), std::move(stop)));
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, kStackBytes);
  // Every signal blocked in the new thread (it inherits the mask it is created with): the
  // agent's signals queue for its signalfd, and none is delivered here instead.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  const int rc = pthread_create(&t->thread_, &attr, &HttpServerThread::Main, t.get());
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  pthread_attr_destroy(&attr);
  if (rc != 0) return InternalError(std::string("pthread_create: ") + std::strerror(rc));
  t->joinable_ = true;
#if defined(__linux__)
  pthread_setname_np(t->thread_, name);
#else
  (void)name;
#endif
  return t;
}

HttpServerThread::~HttpServerThread() {
  if (joinable_) {
    stop_->Notify();
    pthread_join(thread_, nullptr);
  }
  server_.reset();
}

void* HttpServerThread::Main(void* self) {
  static_cast<HttpServerThread*>(self)->Serve();
  return nullptr;
}

void HttpServerThread::Serve() {
  pollfd fds[2] = {{server_->fd(), POLLIN, 0}, {stop_->fd(), POLLIN, 0}};
  auto last_wake = std::chrono::steady_clock::time_point();
  for (;;) {
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      // Only EFAULT, EINVAL or ENOMEM: no way to serve on; the endpoint goes quiet, said once.
      spdlog::error("HTTP server thread: poll: {}; no longer serving port {}", std::strerror(errno),
                    port_);
      return;
    }
    if (fds[1].revents != 0) return;  // stopped
    if (fds[0].revents == 0) continue;
    wakeups_.fetch_add(1, std::memory_order_relaxed);
    server_->OnReadable();
    // In a stream of requests (woken less than kStreamGap after the last time), rest kGather
    // before looking again, so that the next wake-up finds the requests of several connections
    // waiting instead of each costing one. The stop event still ends the rest at once.
    const auto now = std::chrono::steady_clock::now();
    if (now - last_wake < kStreamGap) {
      pollfd stop = fds[1];
      if (poll(&stop, 1, static_cast<int>(kGather.count())) > 0) return;
    }
    last_wake = now;
  }
}

}  // namespace trainlet::agent
