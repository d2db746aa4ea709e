// EventLoop: the one loop each daemon runs (DESIGN.md "Wire and threads"): zmq_poll over the
// sources registered with it (ZeroMQ sockets and raw descriptors), timers, and per-iteration
// ticks that say how long the loop may sleep. Nobody builds or indexes a poll-item array by hand:
// a component registers what it waits for, with the callback that handles it, and removes it
// when done.
//
// One iteration (RunOnce), in this order, which callers may rely on:
//  1. timers whose time (Env::MonotonicNow) has come, earliest first (ties: first armed first);
//  2. ticks, in registration order; each returns the latest time the loop may sleep until;
//  3. one zmq_poll, for at most the smallest of: the ticks' deadlines, the next timer, and
//     RunOnce's max_wait (rounded up to whole milliseconds; 0 means look without waiting);
//  4. the callbacks of the sources that are ready, in registration order (so a daemon that
//     registers its signals before its sockets handles a SIGTERM before reading more requests).
// Stop(), called from any callback, ends the iteration at once: nothing after that callback runs
// (no more ready sources, no poll after a tick that stopped), and Run() returns.
//
// Registration: Add*/RunAt may be called at any time, callbacks included; a source added during
// step 4 is polled from the next iteration. Remove/Cancel may be called from anywhere, a callback
// included (its own source, or another): a removed source's callback never runs afterwards.
// Ids are never reused.
//
// A signal that interrupts zmq_poll (EINTR) ends the iteration with no source ready; the loop
// goes round again. Any other zmq_poll failure is returned as kInternal.
//
// Threads: owned by one thread, which calls everything here; no locks. The clock is the Env's,
// so a test's fake clock drives the timers and the ticks' `now` (a poll still waits in real time,
// which a test bounds with max_wait).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "common/platform/env.h"
#include "common/status.h"

namespace trainlet::platform {

class EventLoop {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  using SourceId = uint64_t;
  using TimerId = uint64_t;
  // Events, as zmq_poll names them (the same values as ZMQ_POLLIN, ZMQ_POLLOUT, ZMQ_POLLERR).
  static constexpr short kReadable = 1;
  static constexpr short kWritable = 2;
  static constexpr short kError = 4;
  // No limit on a wait: RunOnce(kForever) sleeps until a source, a timer or a tick's deadline.
  static constexpr std::chrono::milliseconds kForever = std::chrono::milliseconds::max();

  // Called with the events that are ready (a subset of those asked for, or kError).
  using SourceCallback = std::function<void(short revents)>;
  // Called with the iteration's monotonic time; returns the latest time the loop may sleep
  // until, or nullopt when this tick has nothing to wake for.
  using TickCallback = std::function<std::optional<TimePoint>(TimePoint now)>;

  explicit EventLoop(Env& env);
  ~EventLoop();
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  // A ZeroMQ socket (zmq::socket_t::handle()), owned by the caller, who removes it before
  // closing it. `events`: kReadable and/or kWritable.
  SourceId AddSocket(void* zmq_socket, short events, SourceCallback callback);
  // A descriptor, owned by the caller, who removes it before closing it. A negative fd (a
  // component whose OS has no descriptor for it) is accepted and never ready.
  SourceId AddFd(int fd, short events, SourceCallback callback);
  // Runs `tick` at step 2 of every iteration, after the ticks added before it.
  SourceId AddTick(TickCallback tick);
  // Removes a source or a tick. Unknown or already removed ids are ignored.
  void Remove(SourceId id);

  // Runs `callback` once, at the first iteration at or after `when`.
  TimerId RunAt(TimePoint when, std::function<void()> callback);
  // Unknown, fired or cancelled ids are ignored.
  void Cancel(TimerId id);

  // One iteration (see above). OK after a poll, an EINTR or a Stop(); kInternal when zmq_poll
  // failed otherwise. Must not be called from one of this loop's callbacks.
  Status RunOnce(std::chrono::milliseconds max_wait);
  // Iterates until Stop(): OK then, or the first error of RunOnce.
  Status Run();
  // From a callback: ends the current iteration after it, and Run() with it. Each RunOnce starts
  // unstopped, so a later RunOnce or Run() goes on.
  void Stop() { stopped_ = true; }
  // Whether the last iteration was ended by Stop().
  bool stopped() const { return stopped_; }

 private:
  struct Source;
  // Runs the timers due at `now`, earliest first, until one calls Stop().
  void FireTimers(TimePoint now);
  // Runs the ticks; the earliest deadline they ask for (or the next timer's), if any.
  std::optional<TimePoint> RunTicks(TimePoint now);
  // The poll and the ready sources' callbacks.
  Status PollAndDispatch(TimePoint now, std::optional<TimePoint> wake,
                         std::chrono::milliseconds max_wait);
  // Drops removed sources, when no iteration walks the list.
  void Compact();

  Env& env_;
  // Owned by the loop. Registration order; removed entries are marked, then compacted.
  std::vector<std::shared_ptr<Source>> sources_;
  std::map<std::pair<TimePoint, TimerId>, std::function<void()>> timers_;
  std::map<TimerId, TimePoint> timer_times_;  // for Cancel
  uint64_t next_id_ = 1;                      // one id space for sources, ticks and timers
  bool stopped_ = false;
  bool running_ = false;  // inside RunOnce: callbacks may not re-enter it
  bool removed_any_ = false;
};

}  // namespace trainlet::platform
