// Descriptors created close-on-exec (and non-blocking when asked), and sends that cannot raise
// SIGPIPE. Linux sets the flags atomically (pipe2, SOCK_CLOEXEC, accept4, MSG_NOSIGNAL); macOS
// has none of those and gets fcntl and SO_NOSIGPIPE. The fcntl path leaves a window in which a
// concurrent spawn could inherit the descriptor; the spawner closes every descriptor above
// stderr in the child anyway (process_control.h, vfork_spawn.h), so no worker keeps one.
//
// Each function returns what its system call does: a descriptor (or 0) on success, -1 with errno
// set on failure.
#pragma once

#include <sys/socket.h>
#include <sys/types.h>

namespace trainlet::platform {

enum class Blocking { kBlocking, kNonBlocking };

// pipe(2), both ends close-on-exec.
int OpenPipe(int fds[2], Blocking blocking = Blocking::kBlocking);
// socket(2), close-on-exec; on macOS also SO_NOSIGPIPE, so SendNoSignal cannot raise SIGPIPE.
int OpenSocket(int domain, int type, int protocol, Blocking blocking = Blocking::kBlocking);
// accept(2) of a connection that is close-on-exec (and SO_NOSIGPIPE on macOS).
int AcceptConnection(int listen_fd, Blocking blocking = Blocking::kBlocking);
// send(2)/sendto(2) that never raises SIGPIPE on a socket from OpenSocket/AcceptConnection.
ssize_t SendNoSignal(int fd, const void* data, size_t size, int flags);
ssize_t SendToNoSignal(int fd, const void* data, size_t size, int flags, const sockaddr* to,
                       socklen_t to_len);
// Sets FD_CLOEXEC and, for kNonBlocking, O_NONBLOCK on an existing descriptor.
int SetDescriptorFlags(int fd, Blocking blocking);

// Makes what was written to `fd` durable (to the device, past its write cache): fdatasync on
// Linux; on macOS, whose fsync stops at the drive's cache, fcntl(F_FULLFSYNC), or fsync where the
// file system refuses that.
int SyncData(int fd);

}  // namespace trainlet::platform
