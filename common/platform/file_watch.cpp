#include "common/platform/file_watch.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/platform/backend.h"

#if defined(TRAINLET_NATIVE_LINUX)
#include <sys/inotify.h>
#elif defined(TRAINLET_NATIVE_APPLE)
#include <sys/event.h>
#endif

namespace trainlet::platform {

#if defined(TRAINLET_NATIVE_LINUX)

Result<std::unique_ptr<FileWatch>> FileWatch::Open() {
  const int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (fd < 0) {
    return InternalError(std::string("inotify_init1: ") + std::strerror(errno));
  }
  return std::unique_ptr<FileWatch>(new FileWatch(fd));
}

int FileWatch::Add(const std::string& path) {
  return inotify_add_watch(fd_, path.c_str(), IN_MODIFY);
}

void FileWatch::Remove(int handle) {
  if (handle >= 0) inotify_rm_watch(fd_, handle);
}

void FileWatch::Drain() {
  char buf[4096];
  while (read(fd_, buf, sizeof buf) > 0) {
  }
}

#elif defined(TRAINLET_NATIVE_APPLE)  // not compiled on Linux (macOS only)

Result<std::unique_ptr<FileWatch>> FileWatch::Open() {
  const int kq = kqueue();  // not inherited by children: no close-on-exec needed
  if (kq < 0) {
    return InternalError(std::string("kqueue: ") + std::strerror(errno));
  }
  return std::unique_ptr<FileWatch>(new FileWatch(kq));
}

// The handle is a descriptor of the file, opened for events only: closing it ends the watch.
int FileWatch::Add(const std::string& path) {
  const int file = open(path.c_str(), O_EVTONLY | O_CLOEXEC);
  if (file < 0) return -1;
  struct kevent change;
  EV_SET(&change, file, EVFILT_VNODE, EV_ADD | EV_ENABLE | EV_CLEAR, NOTE_WRITE | NOTE_EXTEND, 0,
         nullptr);
  if (kevent(fd_, &change, 1, nullptr, 0, nullptr) != 0) {
    const int err = errno;
    close(file);
    errno = err;
    return -1;
  }
  return file;
}

void FileWatch::Remove(int handle) {
  if (handle >= 0) close(handle);
}

void FileWatch::Drain() {
  struct kevent fired[16];
  const timespec now{0, 0};
  while (kevent(fd_, nullptr, 0, fired, 16, &now) == 16) {
  }
}

#else  // portable: the owner polls

Result<std::unique_ptr<FileWatch>> FileWatch::Open() {
  return std::unique_ptr<FileWatch>(new FileWatch(-1));
}
int FileWatch::Add(const std::string&) { return 0; }
void FileWatch::Remove(int) {}
void FileWatch::Drain() {}

#endif

FileWatch::~FileWatch() {
  if (fd_ >= 0) close(fd_);
}

}  // namespace trainlet::platform
