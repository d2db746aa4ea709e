#include "common/platform/signal_watch.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/platform/backend.h"
#include "common/platform/descriptors.h"

#if defined(TRAINLET_NATIVE_LINUX)
#include <sys/signalfd.h>
#endif

namespace trainlet::platform {
namespace {

std::string Failed(const char* call) { return std::string(call) + ": " + std::strerror(errno); }

#if defined(TRAINLET_NATIVE_LINUX)

sigset_t SetOf(std::initializer_list<int> signals) {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : signals) sigaddset(&set, sig);
  return set;
}

#else

// The self-pipe: written by the handler (any thread), read by the one SignalWatch.
int g_pipe[2] = {-1, -1};

void OnSignal(int sig) {
  const int saved = errno;
  const unsigned char byte = static_cast<unsigned char>(sig);
  (void)!write(g_pipe[1], &byte, 1);  // full pipe: the loop has wake-ups enough already
  errno = saved;
}

#endif

}  // namespace

Status PrepareSignals(std::initializer_list<int> signals) {
#if defined(TRAINLET_NATIVE_LINUX)
  const sigset_t set = SetOf(signals);
  if (const int rc = pthread_sigmask(SIG_BLOCK, &set, nullptr); rc != 0) {
    errno = rc;
    return InternalError(Failed("pthread_sigmask"));
  }
  return Status::Ok();
#else
  if (g_pipe[0] < 0 && OpenPipe(g_pipe, Blocking::kNonBlocking) != 0) {
    return InternalError(Failed("pipe"));
  }
  for (int sig : signals) {
    struct sigaction sa;
    std::memset(&sa, 0, sizeof sa);
    sa.sa_handler = OnSignal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART | (sig == SIGCHLD ? SA_NOCLDSTOP : 0);
    if (sigaction(sig, &sa, nullptr) != 0) return InternalError(Failed("sigaction"));
  }
  // Undo a mask a parent left (Linux's PrepareSignals blocks these): a blocked signal would
  // never reach the handler.
  sigset_t set;
  sigemptyset(&set);
  for (int sig : signals) sigaddset(&set, sig);
  pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
  return Status::Ok();
#endif
}

Result<std::unique_ptr<SignalWatch>> SignalWatch::Open(std::initializer_list<int> signals) {
  TRAINLET_RETURN_IF_ERROR(PrepareSignals(signals));
#if defined(TRAINLET_NATIVE_LINUX)
  const sigset_t set = SetOf(signals);
  const int fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
  if (fd < 0) {
    return InternalError(Failed("signalfd"));
  }
  return std::unique_ptr<SignalWatch>(new SignalWatch(fd, true, signals));
#else
  return std::unique_ptr<SignalWatch>(new SignalWatch(g_pipe[0], false, signals));
#endif
}

SignalWatch::~SignalWatch() {
  if (owned_) close(fd_);
}

std::vector<int> SignalWatch::Take() {
  std::vector<int> out;
#if defined(TRAINLET_NATIVE_LINUX)
  signalfd_siginfo info{};
  while (read(fd_, &info, sizeof info) == static_cast<ssize_t>(sizeof info)) {
    out.push_back(static_cast<int>(info.ssi_signo));
  }
#else
  unsigned char bytes[64];
  ssize_t n;
  while ((n = read(fd_, bytes, sizeof bytes)) > 0 || (n < 0 && errno == EINTR)) {
    for (ssize_t i = 0; i < n; ++i) {
      const int sig = bytes[i];
      // Signals of an earlier watch's set (a test that opened another) are not this one's.
      if (std::find(signals_.begin(), signals_.end(), sig) != signals_.end()) out.push_back(sig);
    }
  }
#endif
  return out;
}

}  // namespace trainlet::platform
