// ProcessHandle: a process to signal and to watch for its exit, that cannot be mistaken for a
// later process given the same pid (the pid is checked with its start time, process_info.h).
//
//  - Linux: a pidfd. Signals go through it, and it is readable once the process has exited.
//  - macOS: a kqueue holding EVFILT_PROC NOTE_EXIT, readable once the process has exited;
//    signals are sent with kill() while that exit has not come.
//  - Portable build: no descriptor (fd() is -1). Exited() compares the start time again, so the
//    owner polls it on a timer (kPollInterval); signals are sent with kill() while it matches.
//
// Movable, not copyable; owned by one thread.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>

namespace trainlet::platform {

class ProcessHandle {
 public:
  // How often an owner polls Exited() when fd() is -1.
  static constexpr std::chrono::milliseconds kPollInterval{100};

  ProcessHandle() = default;
  // A handle on `pid` if it is still the process that started at `start_time` (from
  // ProcessStartTime) and has not exited; otherwise an invalid handle. The check is made again
  // once the handle is held, so a valid handle names that very process.
  static ProcessHandle Open(pid_t pid, uint64_t start_time);
  // A handle on an unreaped child of the caller, whose pid cannot be reused until it is reaped:
  // no check is needed. `start_time` is the child's (for the portable build's polling).
  static ProcessHandle OpenChild(pid_t pid, uint64_t start_time);
  ~ProcessHandle();
  ProcessHandle(ProcessHandle&& other) noexcept;
  ProcessHandle& operator=(ProcessHandle&& other) noexcept;

  bool valid() const { return pid_ > 0; }
  // Readable once the process has exited; -1 when invalid or where exits are polled.
  int fd() const { return fd_; }
  // The process has exited (a zombie counts). Never blocks. True for an invalid handle.
  bool Exited() const;
  // Sends `sig`: 0, or an errno value (ESRCH once it has exited or for an invalid handle).
  int Signal(int sig) const;
  // Closes the handle (the descriptor leaves any poll set); valid() is false after.
  void Reset();

 private:
  pid_t pid_ = 0;
  uint64_t start_time_ = 0;
  int fd_ = -1;
};

}  // namespace trainlet::platform
