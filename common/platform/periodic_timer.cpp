#include "common/platform/periodic_timer.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

#if defined(__linux__)
#include <sys/timerfd.h>
#elif defined(__APPLE__)
#include <sys/event.h>
#else
#error "trainlet needs timerfd (Linux) or kqueue (macOS) for PeriodicTimer"
#endif

namespace trainlet::platform {

Result<std::unique_ptr<PeriodicTimer>> PeriodicTimer::Open(std::chrono::microseconds period) {
  const int64_t us = std::max<int64_t>(1, period.count());
#if defined(__linux__)
  const int fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  if (fd < 0) {
    return InternalError(std::string("timerfd_create: ") + std::strerror(errno));
  }
  itimerspec spec{};
  spec.it_interval.tv_sec = us / 1000000;
  spec.it_interval.tv_nsec = (us % 1000000) * 1000;
  spec.it_value = spec.it_interval;
  if (timerfd_settime(fd, 0, &spec, nullptr) != 0) {
    const std::string why = std::string("timerfd_settime: ") + std::strerror(errno);
    close(fd);
    return InternalError(why);
  }
#else
  // Not compiled on Linux (macOS only). A kqueue descriptor is pollable (readable while an event
  // is pending) and is not inherited by children, so it needs no close-on-exec flag.
  const int fd = kqueue();
  if (fd < 0) {
    return InternalError(std::string("kqueue: ") + std::strerror(errno));
  }
  struct kevent change;
  EV_SET(&change, 1, EVFILT_TIMER, EV_ADD | EV_ENABLE, NOTE_USECONDS, us, nullptr);
  if (kevent(fd, &change, 1, nullptr, 0, nullptr) != 0) {
    const std::string why = std::string("kevent(EVFILT_TIMER): ") + std::strerror(errno);
    close(fd);
    return InternalError(why);
  }
#endif
  return std::unique_ptr<PeriodicTimer>(new PeriodicTimer(fd));
}

PeriodicTimer::~PeriodicTimer() { close(fd_); }

bool PeriodicTimer::Consume() {
#if defined(__linux__)
  uint64_t expirations = 0;
  return read(fd_, &expirations, sizeof expirations) == static_cast<ssize_t>(sizeof expirations);
#else
  struct kevent fired;
  const timespec now{0, 0};
  return kevent(fd_, nullptr, 0, &fired, 1, &now) == 1;
#endif
}

}  // namespace trainlet::platform
