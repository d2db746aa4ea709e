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
#include <vector>

namespace trainlet::platform {

// Returns "" or why it failed (names the call). Safe to call again with more signals.
std::string PrepareSignals(std::initializer_list<int> signals);

class SignalWatch {
 public:
  // Watches `signals`, which PrepareSignals should have covered (it is done here otherwise,
  // too late for threads started since). nullptr with *error set on failure. The self-pipe is
  // process-wide: where it is used, one SignalWatch per process reads it.
  static std::unique_ptr<SignalWatch> Open(std::initializer_list<int> signals, std::string* error);
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
