#include "agent/http_server_thread.h"

#include <signal.h>
#include <spdlog/spdlog.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>

namespace trainlet::agent {

HttpServerThread::HttpServerThread(std::unique_ptr<ProgressHttpsServer> server,
                                   std::chrono::milliseconds gather)
    : server_(std::move(server)), port_(server_->port()), gather_(gather) {}

Result<std::unique_ptr<HttpServerThread>> HttpServerThread::Start(
    std::unique_ptr<ProgressHttpsServer> server, const char* name,
    std::chrono::milliseconds gather) {
  TRAINLET_CHECK(server != nullptr);
  TRAINLET_CHECK(gather.count() >= 0);
  std::unique_ptr<HttpServerThread> t(new HttpServerThread(std::move(server), gather));
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
  using Clock = std::chrono::steady_clock;
  // When the thread last went to wait: a wake-up sooner than kStreamGap after it is a stream.
  auto waiting_since = Clock::time_point();
  // One epoll_wait on the server's own set per wake-up; false once the destructor interrupts.
  while (server_->Wait(-1)) {
    wakeups_.fetch_add(1, std::memory_order_relaxed);
    // In a stream of requests, rest `gather` before looking again, so that the next wake-up
    // finds the requests of several connections waiting instead of each costing one. The gap is
    // counted from the end of the last rest, so that a rest as long as kStreamGap does not make
    // every other wake-up look like the start of a stream. A stop waits for the rest.
    auto now = Clock::now();
    if (gather_.count() > 0 && now - waiting_since < kStreamGap) {
      std::this_thread::sleep_for(gather_);
      now = Clock::now();
    }
    waiting_since = now;
  }
}

}  // namespace trainlet::agent
