#include "common/platform/poll_set.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#if defined(__linux__)
#include <sys/epoll.h>
#elif defined(__APPLE__)
#include <sys/event.h>
#else
#error "trainlet needs epoll (Linux) or kqueue (macOS) for PollSet"
#endif

namespace trainlet::platform {

Result<std::unique_ptr<PollSet>> PollSet::Open() {
#if defined(__linux__)
  const int fd = epoll_create1(EPOLL_CLOEXEC);
  const char* call = "epoll_create1";
#else
  const int fd = kqueue();  // not inherited by children: no close-on-exec needed
  const char* call = "kqueue";
#endif
  if (fd < 0) {
    return InternalError(std::string(call) + ": " + std::strerror(errno));
  }
  return std::unique_ptr<PollSet>(new PollSet(fd));
}

PollSet::~PollSet() { close(fd_); }

#if defined(__linux__)

int PollSet::Apply(int fd, uint32_t old_events, uint32_t events, void* tag) {
  epoll_event ev{};
  ev.events = ((events & kReadable) ? EPOLLIN : 0u) | ((events & kWritable) ? EPOLLOUT : 0u);
  ev.data.ptr = tag;
  const int op = events == 0 ? EPOLL_CTL_DEL : old_events == 0 ? EPOLL_CTL_ADD : EPOLL_CTL_MOD;
  return epoll_ctl(fd_, op, fd, &ev) == 0 ? 0 : errno;
}

int PollSet::Add(int fd, uint32_t events, void* tag) { return Apply(fd, 0, events, tag); }
int PollSet::Modify(int fd, uint32_t events, void* tag) { return Apply(fd, ~0u, events, tag); }
void PollSet::Remove(int fd) { Apply(fd, ~0u, 0, nullptr); }

std::vector<PollSet::Event> PollSet::Wait(size_t max, int timeout_ms) {
  // On the stack up to 64 (what the callers ask for): a thread that waits here per wake-up (the
  // agent's progress thread) allocates only the answer, once (bench/progress: ~3% of its CPU was
  // these).
  epoll_event stack[64];
  std::vector<epoll_event> heap(max > 64 ? max : 0);
  epoll_event* raw = max > 64 ? heap.data() : stack;
  const int n = epoll_wait(fd_, raw, static_cast<int>(max), timeout_ms);
  std::vector<Event> out;
  out.reserve(n > 0 ? static_cast<size_t>(n) : 0);
  for (int i = 0; i < n; ++i) {
    uint32_t events = 0;
    if (raw[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) events |= kReadable;
    if (raw[i].events & (EPOLLOUT | EPOLLHUP | EPOLLERR)) events |= kWritable;
    out.push_back(Event{raw[i].data.ptr, events});
  }
  return out;
}

#else  // kqueue: not compiled on Linux (macOS only)

int PollSet::Apply(int fd, uint32_t old_events, uint32_t events, void* tag) {
  if (fd < 0) return EBADF;
  if (static_cast<size_t>(fd) >= registered_.size()) registered_.resize(fd + 1, 0);
  const uint32_t had = old_events == 0 ? 0 : registered_[fd];
  struct kevent changes[2];
  int n = 0;
  for (const auto& [bit, filter] : {std::pair{kReadable, EVFILT_READ}, {kWritable, EVFILT_WRITE}}) {
    if (events & bit) {
      EV_SET(&changes[n++], fd, filter, EV_ADD | EV_ENABLE, 0, 0, tag);  // also updates the tag
    } else if (had & bit) {
      EV_SET(&changes[n++], fd, filter, EV_DELETE, 0, 0, nullptr);
    }
  }
  registered_[fd] = events;
  if (n == 0) return 0;
  return kevent(fd_, changes, n, nullptr, 0, nullptr) == 0 || errno == ENOENT ? 0 : errno;
}

int PollSet::Add(int fd, uint32_t events, void* tag) { return Apply(fd, 0, events, tag); }
int PollSet::Modify(int fd, uint32_t events, void* tag) { return Apply(fd, ~0u, events, tag); }
void PollSet::Remove(int fd) { Apply(fd, ~0u, 0, nullptr); }

std::vector<PollSet::Event> PollSet::Wait(size_t max, int timeout_ms) {
  std::vector<struct kevent> raw(max);
  const timespec limit{timeout_ms / 1000, (timeout_ms % 1000) * 1000000L};
  const int n = kevent(fd_, nullptr, 0, raw.data(), static_cast<int>(raw.size()),
                       timeout_ms < 0 ? nullptr : &limit);
  std::vector<Event> out;
  for (int i = 0; i < n; ++i) {
    uint32_t events = raw[i].filter == EVFILT_WRITE ? kWritable : kReadable;
    if (raw[i].flags & (EV_EOF | EV_ERROR)) events = kReadable | kWritable;
    out.push_back(Event{raw[i].udata, events});
  }
  return out;
}

#endif

}  // namespace trainlet::platform
