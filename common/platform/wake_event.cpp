#include "common/platform/wake_event.h"

#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "common/platform/backend.h"
#include "common/platform/descriptors.h"

#if defined(TRAINLET_NATIVE_LINUX)
#include <sys/eventfd.h>
#endif

namespace trainlet::platform {

Result<std::unique_ptr<WakeEvent>> WakeEvent::Open() {
#if defined(TRAINLET_NATIVE_LINUX)
  const int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (fd < 0) {
    return InternalError(std::string("eventfd: ") + std::strerror(errno));
  }
  return std::unique_ptr<WakeEvent>(new WakeEvent(fd, fd));
#else
  int fds[2];
  if (OpenPipe(fds, Blocking::kNonBlocking) != 0) {
    return InternalError(std::string("pipe: ") + std::strerror(errno));
  }
  return std::unique_ptr<WakeEvent>(new WakeEvent(fds[0], fds[1]));
#endif
}

WakeEvent::~WakeEvent() {
  close(read_fd_);
  if (write_fd_ != read_fd_) close(write_fd_);
}

void WakeEvent::Notify() {
  // An eventfd takes an 8-byte count; a pipe any byte. A full pipe is readable already.
  const uint64_t one = 1;
  (void)!write(write_fd_, &one, write_fd_ == read_fd_ ? sizeof one : 1);
}

void WakeEvent::Drain() {
  char buf[64];  // >= 8: an eventfd read needs room for its count
  while (read(read_fd_, buf, sizeof buf) > 0) {
  }
}

}  // namespace trainlet::platform
