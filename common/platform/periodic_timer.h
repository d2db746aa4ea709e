// A periodic timer as a readable descriptor: a timerfd on Linux, a kqueue holding one
// EVFILT_TIMER on macOS. The first expiry is one period after Open.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <utility>

#include "common/status.h"

namespace trainlet::platform {

class PeriodicTimer {
 public:
  // period > 0. kInternal (naming the call) on failure.
  static Result<std::unique_ptr<PeriodicTimer>> Open(std::chrono::microseconds period);
  // The older shape, for callers not yet moved to the Result above (agent/, trainlet-step):
  // nullptr with *error set to the Status's message. Goes when they have moved.
  static std::unique_ptr<PeriodicTimer> Open(std::chrono::microseconds period, std::string* error) {
    auto opened = Open(period);
    if (!opened.ok()) *error = opened.status().message();
    return opened.ok() ? std::move(opened).value() : nullptr;
  }
  ~PeriodicTimer();
  PeriodicTimer(const PeriodicTimer&) = delete;
  PeriodicTimer& operator=(const PeriodicTimer&) = delete;

  // Readable once the timer has expired since the last Consume(). Owned by this object.
  int fd() const { return fd_; }
  // True when it expired (once or more) since the last call; clears the readiness.
  bool Consume();

 private:
  explicit PeriodicTimer(int fd) : fd_(fd) {}
  const int fd_;
};

}  // namespace trainlet::platform
