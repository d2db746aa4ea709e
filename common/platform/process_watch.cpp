#include "common/platform/process_watch.h"

#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#include "common/platform/backend.h"
#include "common/platform/process_info.h"

#if defined(TRAINLET_NATIVE_LINUX)
#include <sys/syscall.h>
#elif defined(TRAINLET_NATIVE_APPLE)
#include <sys/event.h>
#endif

namespace trainlet::platform {
namespace {

// Opens what makes fd() readable at the exit of `pid`, or -1 (then exits are polled).
int OpenExitWatch(pid_t pid) {
#if defined(TRAINLET_NATIVE_LINUX)
  // The raw system call: Debian 12's glibc declares pidfd_open without C linkage for C++.
  return static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
#elif defined(TRAINLET_NATIVE_APPLE)
  // Not compiled on Linux (macOS only).
  const int kq = kqueue();
  if (kq < 0) return -1;
  struct kevent change;
  EV_SET(&change, pid, EVFILT_PROC, EV_ADD | EV_ENABLE | EV_ONESHOT, NOTE_EXIT, 0, nullptr);
  if (kevent(kq, &change, 1, nullptr, 0, nullptr) != 0) {  // ESRCH: already gone
    close(kq);
    return -1;
  }
  return kq;
#else
  (void)pid;
  return -1;
#endif
}

}  // namespace

ProcessHandle ProcessHandle::Open(pid_t pid, uint64_t start_time) {
  ProcessHandle h;
  if (pid <= 0 || !SameProcessAlive(pid, start_time)) return h;
  h.pid_ = pid;
  h.start_time_ = start_time;
  h.fd_ = OpenExitWatch(pid);
  // Again with the watch held: a pid reused in between has another start time.
  if (!SameProcessAlive(pid, start_time)) h.Reset();
  return h;
}

ProcessHandle ProcessHandle::OpenChild(pid_t pid, uint64_t start_time) {
  ProcessHandle h;
  if (pid <= 0) return h;
  h.pid_ = pid;
  h.start_time_ = start_time;
  h.fd_ = OpenExitWatch(pid);
  return h;
}

ProcessHandle::~ProcessHandle() { Reset(); }

ProcessHandle::ProcessHandle(ProcessHandle&& other) noexcept
    : pid_(std::exchange(other.pid_, 0)),
      start_time_(other.start_time_),
      fd_(std::exchange(other.fd_, -1)) {}

ProcessHandle& ProcessHandle::operator=(ProcessHandle&& other) noexcept {
  if (this != &other) {
    Reset();
    pid_ = std::exchange(other.pid_, 0);
    start_time_ = other.start_time_;
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

void ProcessHandle::Reset() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
  pid_ = 0;
}

bool ProcessHandle::Exited() const {
  if (!valid()) return true;
  if (fd_ >= 0) {
    pollfd p{fd_, POLLIN, 0};
    return poll(&p, 1, 0) == 1;
  }
  return !SameProcessAlive(pid_, start_time_);
}

int ProcessHandle::Signal(int sig) const {
  if (!valid()) return ESRCH;
#if defined(TRAINLET_NATIVE_LINUX)
  if (fd_ >= 0) {
    return syscall(SYS_pidfd_send_signal, fd_, sig, nullptr, 0) == 0 ? 0 : errno;
  }
#endif
  // The exit watch has not fired (or the start time still matches): the pid is still ours.
  if (Exited()) return ESRCH;
  return kill(pid_, sig) == 0 ? 0 : errno;
}

}  // namespace trainlet::platform
