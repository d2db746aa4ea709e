// Signals as a readable descriptor, so an event loop polls them with its sockets.
//
// Linux: a signalfd; the signals are blocked in every thread and queue for it. macOS and the
// portable build: a self-pipe; a handler writes each signal's number into it (SA_RESTART, so
// blocking calls elsewhere resume; poll() still returns EINTR, which the loops retry).
//
// Usage: PrepareSignals({...}) first thing in main(), before any thread exists (ZeroMQ starts
// threads): on Linux every later thread inherits the mask; elsewhere the handlers and the pipe
// exist before any signal can come. Then a SignalWatch over the same signals, owned by the loop.
// Workers are unaffected either way: the spawner resets the mask and every handler (a handler
// does not survive exec anyway).
#pragma once

#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"

namespace trainlet::platform {

// kInternal, naming the call, when it failed. Safe to call again with more signals.
Status PrepareSignals(std::initializer_list<int> signals);

class SignalWatch {
 public:
  // Watches `signals`, which PrepareSignals should have covered (it is done here otherwise,
  // too late for threads started since). kInternal (naming the call) on failure. The self-pipe
  // is process-wide: where it is used, one SignalWatch per process reads it.
  static Result<std::unique_ptr<SignalWatch>> Open(std::initializer_list<int> signals);
  // The older shape, for callers not yet moved to the Result above (agent/, trainlet-step):
  // nullptr with *error set to the Status's message. Goes when they have moved.
  static std::unique_ptr<SignalWatch> Open(std::initializer_list<int> signals, std::string* error) {
    auto opened = Open(signals);
    if (!opened.ok()) *error = opened.status().message();
    return opened.ok() ? std::move(opened).value() : nullptr;
  }
  ~SignalWatch();
  SignalWatch(const SignalWatch&) = delete;
  SignalWatch& operator=(const SignalWatch&) = delete;

  // Readable when a signal came. Owned by this object.
  int fd() const { return fd_; }
  // The signals that came since the last call, oldest first; never blocks. Standard signals do
  // not queue: one that came twice before the loop looked may be listed once.
  std::vector<int> Take();

 private:
  SignalWatch(int fd, bool owned, std::vector<int> signals)
      : fd_(fd), owned_(owned), signals_(std::move(signals)) {}

  const int fd_;
  const bool owned_;  // false: the process-wide self-pipe, which outlives this watch
  const std::vector<int> signals_;
};

}  // namespace trainlet::platform
