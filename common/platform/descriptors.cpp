#include "common/platform/descriptors.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include "common/platform/backend.h"

namespace trainlet::platform {
namespace {

#if !defined(TRAINLET_NATIVE_LINUX)
// Closes fd keeping the errno of the failure that made us close it.
int CloseFailed(int fd) {
  const int err = errno;
  close(fd);
  errno = err;
  return -1;
}

// Sets what Linux sets atomically: FD_CLOEXEC, O_NONBLOCK, and on macOS SO_NOSIGPIPE (sockets).
int FinishSocket(int fd, Blocking blocking) {
  if (fd < 0) return -1;
  if (SetDescriptorFlags(fd, blocking) != 0) return CloseFailed(fd);
#if defined(SO_NOSIGPIPE)
  int one = 1;
  if (setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &one, sizeof one) != 0) return CloseFailed(fd);
#endif
  return fd;
}
#endif

// MSG_NOSIGNAL where the platform has it (Linux, also in the portable build); elsewhere the
// socket carries SO_NOSIGPIPE instead.
#if defined(MSG_NOSIGNAL)
constexpr int kNoSignal = MSG_NOSIGNAL;
#else
constexpr int kNoSignal = 0;
#endif

}  // namespace

int SetDescriptorFlags(int fd, Blocking blocking) {
  const int fd_flags = fcntl(fd, F_GETFD);
  if (fd_flags < 0 || fcntl(fd, F_SETFD, fd_flags | FD_CLOEXEC) != 0) return -1;
  if (blocking == Blocking::kBlocking) return 0;
  const int fl = fcntl(fd, F_GETFL);
  if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) != 0) return -1;
  return 0;
}

int OpenPipe(int fds[2], Blocking blocking) {
#if defined(TRAINLET_NATIVE_LINUX)
  return pipe2(fds, O_CLOEXEC | (blocking == Blocking::kNonBlocking ? O_NONBLOCK : 0));
#else
  if (pipe(fds) != 0) return -1;
  for (int i = 0; i < 2; ++i) {
    if (SetDescriptorFlags(fds[i], blocking) != 0) {
      const int err = errno;
      close(fds[0]);
      close(fds[1]);
      errno = err;
      return -1;
    }
  }
  return 0;
#endif
}

int OpenSocket(int domain, int type, int protocol, Blocking blocking) {
#if defined(TRAINLET_NATIVE_LINUX)
  return socket(domain,
                type | SOCK_CLOEXEC | (blocking == Blocking::kNonBlocking ? SOCK_NONBLOCK : 0),
                protocol);
#else
  return FinishSocket(socket(domain, type, protocol), blocking);
#endif
}

int AcceptConnection(int listen_fd, Blocking blocking) {
#if defined(TRAINLET_NATIVE_LINUX)
  return accept4(listen_fd, nullptr, nullptr,
                 SOCK_CLOEXEC | (blocking == Blocking::kNonBlocking ? SOCK_NONBLOCK : 0));
#else
  return FinishSocket(accept(listen_fd, nullptr, nullptr), blocking);
#endif
}

int SyncData(int fd) {
#if defined(__APPLE__)
  // Not compiled on Linux (macOS only).
  if (fcntl(fd, F_FULLFSYNC) == 0) return 0;
  return fsync(fd);
#else
  return fdatasync(fd);
#endif
}

ssize_t SendNoSignal(int fd, const void* data, size_t size, int flags) {
  return send(fd, data, size, flags | kNoSignal);
}

ssize_t SendToNoSignal(int fd, const void* data, size_t size, int flags, const sockaddr* to,
                       socklen_t to_len) {
  return sendto(fd, data, size, flags | kNoSignal, to, to_len);
}

}  // namespace trainlet::platform
