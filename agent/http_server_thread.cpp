#include "agent/http_server_thread.h"

#include <signal.h>
#include <spdlog/spdlog.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>

namespace trainlet::agent {

HttpServerThread::HttpServerThread(std::unique_ptr<ProgressHttpsServer> server)
    : server_(std::move(server)), port_(server_->port()) {}

Result<std::unique_ptr<HttpServerThread>> HttpServerThread::Start(
    std::unique_ptr<ProgressHttpsServer> server, const char* name) {
  TRAINLET_CHECK(server != nullptr);
  std::unique_ptr<HttpServerThread> t(new HttpServerThread(std::move(server)));
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
    server_->Interrupt();
    pthread_join(thread_, nullptr);
  }
  server_.reset();
}

void* HttpServerThread::Main(void* self) {
  static_cast<HttpServerThread*>(self)->Serve();
  return nullptr;
}

void HttpServerThread::Serve() {
  auto last_wake = std::chrono::steady_clock::time_point();
  // One epoll_wait on the server's own set per wake-up; false once the destructor interrupts.
  while (server_->Wait(-1)) {
    wakeups_.fetch_add(1, std::memory_order_relaxed);
    // In a stream of requests (woken less than kStreamGap after the last time), rest kGather
    // before looking again, so that the next wake-up finds the requests of several connections
    // waiting instead of each costing one. A stop waits for the rest (at most kGather).
    const auto now = std::chrono::steady_clock::now();
    if (now - last_wake < kStreamGap) std::this_thread::sleep_for(kGather);
    last_wake = now;
  }
}

}  // namespace trainlet::agent
