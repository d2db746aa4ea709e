// PollSet: many descriptors behind one, so that a component hands its event loop a single fd
// however many connections it holds. epoll on Linux (the portable build included: plain POSIX
// has no pollable set), kqueue on macOS.
//
// Each member has a tag (any pointer, or null) that Ready() returns with it. Closing a member
// removes it (both kernels drop a closed descriptor), but call Remove() first when the same
// number may be reused before the next Ready(). Owned by one loop; no locks.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"

namespace trainlet::platform {

class PollSet {
 public:
  static constexpr uint32_t kReadable = 1;
  static constexpr uint32_t kWritable = 2;
  struct Event {
    void* tag = nullptr;
    uint32_t events = 0;  // kReadable | kWritable; errors and hang-ups read as both
  };

  // kInternal (naming the call) on failure.
  static Result<std::unique_ptr<PollSet>> Open();
  // The older shape, for callers not yet moved to the Result above (agent/, trainlet-step):
  // nullptr with *error set to the Status's message. Goes when they have moved.
  static std::unique_ptr<PollSet> Open(std::string* error) {
    auto opened = Open();
    if (!opened.ok()) *error = opened.status().message();
    return opened.ok() ? std::move(opened).value() : nullptr;
  }
  ~PollSet();
  PollSet(const PollSet&) = delete;
  PollSet& operator=(const PollSet&) = delete;

  // Readable while a member is ready. Owned by this object.
  int fd() const { return fd_; }
  // Add a member, or change what it waits for. 0, or an errno value.
  int Add(int fd, uint32_t events, void* tag);
  int Modify(int fd, uint32_t events, void* tag);
  void Remove(int fd);
  // Up to `max` ready members; never blocks.
  std::vector<Event> Ready(size_t max) { return Wait(max, 0); }
  // Up to `max` ready members, waiting up to `timeout_ms` (-1: without limit) for one; empty when
  // none came (or a signal interrupted the wait). For a thread that sleeps on the set itself.
  std::vector<Event> Wait(size_t max, int timeout_ms);

 private:
  explicit PollSet(int fd) : fd_(fd) {}
  // kqueue keeps one filter per (fd, direction): what each member has, to change it.
  int Apply(int fd, uint32_t old_events, uint32_t events, void* tag);

  const int fd_;
  std::vector<uint32_t> registered_;  // kqueue only: events registered, by fd number
};

}  // namespace trainlet::platform
