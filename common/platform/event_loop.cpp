#include "common/platform/event_loop.h"

#include <zmq.h>

#include <algorithm>
#include <cerrno>
#include <string>

namespace trainlet::platform {

static_assert(EventLoop::kReadable == ZMQ_POLLIN && EventLoop::kWritable == ZMQ_POLLOUT &&
              EventLoop::kError == ZMQ_POLLERR);

struct EventLoop::Source {
  enum class Kind { kSocket, kFd, kTick };
  SourceId id;
  Kind kind;
  void* socket;
  int fd;
  short events;
  SourceCallback on_ready;  // kSocket, kFd
  TickCallback tick;        // kTick
  bool removed = false;
};

EventLoop::EventLoop(Env& env) : env_(env) {}
EventLoop::~EventLoop() = default;

EventLoop::SourceId EventLoop::AddSocket(void* zmq_socket, short events, SourceCallback callback) {
  TRAINLET_CHECK(zmq_socket != nullptr);
  const SourceId id = next_id_++;
  sources_.push_back(std::make_shared<Source>(
      Source{id, Source::Kind::kSocket, zmq_socket, -1, events, std::move(callback), {}}));
  return id;
}

EventLoop::SourceId EventLoop::AddFd(int fd, short events, SourceCallback callback) {
  const SourceId id = next_id_++;
  sources_.push_back(std::make_shared<Source>(
      Source{id, Source::Kind::kFd, nullptr, fd, events, std::move(callback), {}}));
  return id;
}

EventLoop::SourceId EventLoop::AddTick(TickCallback tick) {
  const SourceId id = next_id_++;
  sources_.push_back(std::make_shared<Source>(
      Source{id, Source::Kind::kTick, nullptr, -1, 0, {}, std::move(tick)}));
  return id;
}

void EventLoop::Remove(SourceId id) {
  for (auto& source : sources_) {
    if (source->id == id && !source->removed) {
      source->removed = true;
      removed_any_ = true;
    }
  }
  if (!running_) Compact();
}

void EventLoop::Compact() {
  if (!removed_any_) return;
  std::erase_if(sources_, [](const std::shared_ptr<Source>& s) { return s->removed; });
  removed_any_ = false;
}

EventLoop::TimerId EventLoop::RunAt(TimePoint when, std::function<void()> callback) {
  const TimerId id = next_id_++;
  timers_.emplace(std::make_pair(when, id), std::move(callback));
  timer_times_.emplace(id, when);
  return id;
}

void EventLoop::Cancel(TimerId id) {
  auto it = timer_times_.find(id);
  if (it == timer_times_.end()) return;
  timers_.erase({it->second, id});
  timer_times_.erase(it);
}

void EventLoop::FireTimers(TimePoint now) {
  // Only timers armed before this round: one that re-arms itself for `now` runs next iteration.
  const TimerId limit = next_id_;
  auto it = timers_.begin();
  while (!stopped_ && it != timers_.end() && it->first.first <= now) {
    if (it->first.second >= limit) {
      ++it;
      continue;
    }
    std::function<void()> callback = std::move(it->second);
    timer_times_.erase(it->first.second);
    timers_.erase(it);
    callback();
    it = timers_.begin();  // the callback may have armed or cancelled timers
  }
}

std::optional<EventLoop::TimePoint> EventLoop::RunTicks(TimePoint now) {
  std::optional<TimePoint> wake;
  // By index: a tick may add sources (appended; a tick added now runs next iteration).
  const size_t count = sources_.size();
  for (size_t i = 0; i < count && !stopped_; ++i) {
    const std::shared_ptr<Source> source = sources_[i];  // kept alive while it runs
    if (source->kind != Source::Kind::kTick || source->removed) continue;
    if (std::optional<TimePoint> t = source->tick(now)) wake = wake ? std::min(*wake, *t) : *t;
  }
  if (!timers_.empty()) {
    const TimePoint next = timers_.begin()->first.first;
    wake = wake ? std::min(*wake, next) : next;
  }
  return wake;
}

Status EventLoop::PollAndDispatch(TimePoint now, std::optional<TimePoint> wake,
                                  std::chrono::milliseconds max_wait) {
  std::chrono::milliseconds wait = max_wait;
  if (wake) {
    const auto until = std::chrono::ceil<std::chrono::milliseconds>(std::max(*wake, now) - now);
    wait = std::min(wait, until);
  }
  const long timeout =
      wait == kForever ? -1 : static_cast<long>(std::max<int64_t>(0, wait.count()));

  std::vector<std::shared_ptr<Source>> polled;
  std::vector<zmq_pollitem_t> items;
  for (const auto& source : sources_) {
    if (source->removed || source->kind == Source::Kind::kTick) continue;
    // A negative fd is never ready (poll(2) would ignore it too): left out of the poll.
    if (source->kind == Source::Kind::kFd && source->fd < 0) continue;
    polled.push_back(source);
    items.push_back({source->socket, source->fd, source->events, 0});
  }
  if (zmq_poll(items.data(), static_cast<int>(items.size()), timeout) < 0) {
    if (zmq_errno() == EINTR) return Status::Ok();
    return InternalError(std::string("zmq_poll: ") + zmq_strerror(zmq_errno()));
  }
  for (size_t i = 0; i < items.size() && !stopped_; ++i) {
    if (items[i].revents == 0 || polled[i]->removed) continue;
    polled[i]->on_ready(items[i].revents);
  }
  return Status::Ok();
}

Status EventLoop::RunOnce(std::chrono::milliseconds max_wait) {
  TRAINLET_CHECK_MSG(!running_, "EventLoop::RunOnce called from one of its own callbacks");
  running_ = true;
  stopped_ = false;
  Status status;
  const TimePoint now = env_.MonotonicNow();
  FireTimers(now);
  std::optional<TimePoint> wake;
  if (!stopped_) wake = RunTicks(now);
  if (!stopped_) status = PollAndDispatch(now, wake, max_wait);
  running_ = false;
  Compact();
  return status;
}

Status EventLoop::Run() {
  while (true) {
    TRAINLET_RETURN_IF_ERROR(RunOnce(kForever));
    if (stopped_) return Status::Ok();
  }
}

}  // namespace trainlet::platform
