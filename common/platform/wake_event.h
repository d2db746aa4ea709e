// A descriptor that one part of the loop makes readable to wake another: an eventfd on Linux, a
// non-blocking self-pipe elsewhere. Not for signal handlers (signal_watch.h has its own pipe).
#pragma once

#include <memory>
#include <string>
#include <utility>

#include "common/status.h"

namespace trainlet::platform {

class WakeEvent {
 public:
  // kInternal (naming the call) on failure.
  static Result<std::unique_ptr<WakeEvent>> Open();
  // The older shape, for callers not yet moved to the Result above (agent/, trainlet-step):
  // nullptr with *error set to the Status's message. Goes when they have moved.
  static std::unique_ptr<WakeEvent> Open(std::string* error) {
    auto opened = Open();
    if (!opened.ok()) *error = opened.status().message();
    return opened.ok() ? std::move(opened).value() : nullptr;
  }
  ~WakeEvent();
  WakeEvent(const WakeEvent&) = delete;
  WakeEvent& operator=(const WakeEvent&) = delete;

  // Readable from Notify() until Drain(). Owned by this object.
  int fd() const { return read_fd_; }
  void Notify();
  void Drain();

 private:
  WakeEvent(int read_fd, int write_fd) : read_fd_(read_fd), write_fd_(write_fd) {}

  const int read_fd_;
  const int write_fd_;  // == read_fd_ for an eventfd
};

}  // namespace trainlet::platform
