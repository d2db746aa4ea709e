// Immediate ACKs on trainlet-pmix's client connections, against libpmix 4.2.2's Nagle stall.
//
// A rank's PMIx client talks to trainlet-pmix over TCP on 127.0.0.1, and libpmix 4.2.2 never sets
// TCP_NODELAY on that socket (pmix_ptl_base_setup_socket tests `#if defined(TCP_NODELAY)` in a
// file that does not include <netinet/tcp.h>; strace shows no such setsockopt). A client that
// sends a one-way message and then another (MPI_Finalize: three DEREGEVENTS, then FINALIZE) has
// the second held by Nagle until the first is ACKed, and the server's kernel, in its
// request/reply ("ping-pong") mode, delays that ACK by its 40 ms minimum: about 40 ms of every
// rank's MPI_Finalize, under orted as under trainlet-pmix (bench/README.md). The socket is the
// rank's, made in the rank by libpmix, so the server cannot set TCP_NODELAY on it.
//
// The server can ACK at once instead. This file gives trainlet-pmix its own accept(2) and read(2),
// exported from the executable (agent/pmix/CMakeLists.txt), so that libpmix's calls resolve to
// them before libc's: a TCP connection accepted in this process (libpmix's listener is the only
// caller) is remembered, and after each read from one that returned data, TCP_QUICKACK is set on
// it, which sends the ACK the kernel was holding and leaves ping-pong mode (tcp(7): the flag is
// not permanent, hence after every read). Every other descriptor and call behaves as libc's: the
// real functions do the work, errno is kept. Nothing to call: linking it in turns it on.
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#include <array>
#include <atomic>

namespace {

// Descriptors above this are left alone (libpmix's clients of one node get low numbers).
constexpr int kMaxFd = 4096;
std::array<std::atomic<bool>, kMaxFd> g_client{};

using ReadFn = ssize_t (*)(int, void*, size_t);
using AcceptFn = int (*)(int, sockaddr*, socklen_t*);

ReadFn RealRead() {
  static const ReadFn real = reinterpret_cast<ReadFn>(dlsym(RTLD_NEXT, "read"));
  return real;
}
AcceptFn RealAccept() {
  static const AcceptFn real = reinterpret_cast<AcceptFn>(dlsym(RTLD_NEXT, "accept"));
  return real;
}

bool IsTcp(int fd) {
  int domain = 0, type = 0;
  socklen_t len = sizeof domain;
  if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) != 0) return false;
  len = sizeof type;
  if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0) return false;
  return (domain == AF_INET || domain == AF_INET6) && type == SOCK_STREAM;
}

}  // namespace

extern "C" {

// libpmix's listener thread accepts its clients with accept(2).
int accept(int fd, sockaddr* addr, socklen_t* len) {
  const int conn = RealAccept()(fd, addr, len);
  if (conn >= 0 && conn < kMaxFd) {
    const int saved = errno;
    const bool tcp = IsTcp(conn);
    g_client[conn].store(tcp, std::memory_order_relaxed);
    errno = saved;
  }
  return conn;
}

// libpmix's progress thread reads each message with read(2).
ssize_t read(int fd, void* buf, size_t count) {
  const ssize_t n = RealRead()(fd, buf, count);
  if (n > 0 && fd >= 0 && fd < kMaxFd && g_client[fd].load(std::memory_order_relaxed)) {
    const int saved = errno;
    const int one = 1;
    // Fails only once the descriptor is no TCP socket any more (closed and reused): forget it.
    if (setsockopt(fd, IPPROTO_TCP, TCP_QUICKACK, &one, sizeof one) != 0)
      g_client[fd].store(false, std::memory_order_relaxed);
    errno = saved;
  }
  return n;
}

}  // extern "C"
