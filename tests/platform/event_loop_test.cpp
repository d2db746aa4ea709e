// platform::EventLoop: descriptors and ZeroMQ sockets as sources, the documented order, removal
// from callbacks, timers and ticks on a fake clock, Stop, and EINTR.
#include "common/platform/event_loop.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "common/platform/descriptors.h"
#include "tests/common/fake_env.h"

namespace trainlet::platform {
namespace {

using namespace std::chrono_literals;
using testing::FakeEnv;

// A pipe whose ends close with the test.
struct Pipe {
  Pipe() { EXPECT_EQ(OpenPipe(fds, Blocking::kNonBlocking), 0); }
  ~Pipe() {
    close(fds[0]);
    close(fds[1]);
  }
  void Write() { EXPECT_EQ(write(fds[1], "x", 1), 1); }
  void Drain() {
    char buf[64];
    while (read(fds[0], buf, sizeof buf) > 0) {
    }
  }
  int read_fd() const { return fds[0]; }
  int fds[2] = {-1, -1};
};

TEST(EventLoopTest, FdSourceRunsWhenReadable) {
  FakeEnv env;
  EventLoop loop(env);
  Pipe pipe;
  int calls = 0;
  short seen = 0;
  loop.AddFd(pipe.read_fd(), EventLoop::kReadable, [&](short revents) {
    ++calls;
    seen = revents;
    pipe.Drain();
  });
  ASSERT_TRUE(loop.RunOnce(0ms).ok());
  EXPECT_EQ(calls, 0);
  pipe.Write();
  ASSERT_TRUE(loop.RunOnce(1000ms).ok());
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(seen & EventLoop::kReadable);
}

TEST(EventLoopTest, ZmqSocketSource) {
  FakeEnv env;
  EventLoop loop(env);
  zmq::context_t ctx;
  zmq::socket_t pull(ctx, zmq::socket_type::pull);
  zmq::socket_t push(ctx, zmq::socket_type::push);
  pull.bind("inproc://event-loop-test");
  push.connect("inproc://event-loop-test");
  std::vector<std::string> got;
  loop.AddSocket(pull.handle(), EventLoop::kReadable, [&](short) {
    zmq::message_t msg;
    while (pull.recv(msg, zmq::recv_flags::dontwait)) got.push_back(msg.to_string());
  });
  push.send(zmq::str_buffer("hello"), zmq::send_flags::none);
  for (int i = 0; i < 50 && got.empty(); ++i) ASSERT_TRUE(loop.RunOnce(100ms).ok());
  EXPECT_EQ(got, std::vector<std::string>{"hello"});
}

TEST(EventLoopTest, ReadySourcesRunInRegistrationOrder) {
  FakeEnv env;
  EventLoop loop(env);
  Pipe a, b, c;
  std::vector<char> order;
  // Registered b, c, a; all three ready at once.
  loop.AddFd(b.read_fd(), EventLoop::kReadable, [&](short) {
    order.push_back('b');
    b.Drain();
  });
  loop.AddFd(c.read_fd(), EventLoop::kReadable, [&](short) {
    order.push_back('c');
    c.Drain();
  });
  loop.AddFd(a.read_fd(), EventLoop::kReadable, [&](short) {
    order.push_back('a');
    a.Drain();
  });
  a.Write();
  c.Write();
  b.Write();
  ASSERT_TRUE(loop.RunOnce(1000ms).ok());
  EXPECT_EQ(order, (std::vector<char>{'b', 'c', 'a'}));
}

TEST(EventLoopTest, RemoveInsideACallback) {
  FakeEnv env;
  EventLoop loop(env);
  Pipe first, second;
  int first_calls = 0, second_calls = 0;
  EventLoop::SourceId second_id = 0;
  EventLoop::SourceId first_id = 0;
  // The first removes itself and the second, which is ready in the same iteration: the second
  // never runs, and neither is polled again.
  first_id = loop.AddFd(first.read_fd(), EventLoop::kReadable, [&](short) {
    ++first_calls;
    loop.Remove(first_id);
    loop.Remove(second_id);
  });
  second_id = loop.AddFd(second.read_fd(), EventLoop::kReadable, [&](short) { ++second_calls; });
  first.Write();
  second.Write();
  ASSERT_TRUE(loop.RunOnce(1000ms).ok());
  ASSERT_TRUE(loop.RunOnce(0ms).ok());  // both still readable (never drained)
  EXPECT_EQ(first_calls, 1);
  EXPECT_EQ(second_calls, 0);
  loop.Remove(first_id);  // again: ignored
}

TEST(EventLoopTest, SourceAddedInACallbackIsPolledNextIteration) {
  FakeEnv env;
  EventLoop loop(env);
  Pipe trigger, later;
  int later_calls = 0;
  trigger.Write();
  later.Write();
  loop.AddFd(trigger.read_fd(), EventLoop::kReadable, [&](short) {
    trigger.Drain();
    loop.AddFd(later.read_fd(), EventLoop::kReadable, [&](short) { ++later_calls; });
  });
  ASSERT_TRUE(loop.RunOnce(1000ms).ok());
  EXPECT_EQ(later_calls, 0);
  ASSERT_TRUE(loop.RunOnce(1000ms).ok());
  EXPECT_EQ(later_calls, 1);
}

TEST(EventLoopTest, TimersFollowTheFakeClock) {
  FakeEnv env;
  EventLoop loop(env);
  std::vector<int> fired;
  const auto t0 = env.MonotonicNow();
  loop.RunAt(t0 + 5s, [&] { fired.push_back(5); });
  const auto cancelled = loop.RunAt(t0 + 2s, [&] { fired.push_back(2); });
  loop.RunAt(t0 + 1s, [&] { fired.push_back(1); });
  loop.Cancel(cancelled);

  ASSERT_TRUE(loop.RunOnce(0ms).ok());
  EXPECT_TRUE(fired.empty());
  env.Advance(1s);
  ASSERT_TRUE(loop.RunOnce(0ms).ok());
  EXPECT_EQ(fired, std::vector<int>{1});
  env.Advance(10s);  // the cancelled one never fires; the 5 s one once
  ASSERT_TRUE(loop.RunOnce(0ms).ok());
  ASSERT_TRUE(loop.RunOnce(0ms).ok());
  EXPECT_EQ(fired, (std::vector<int>{1, 5}));
}

TEST(EventLoopTest, ATimerThatReArmsForNowRunsNextIteration) {
  FakeEnv env;
  EventLoop loop(env);
  int runs = 0;
  std::function<void()> again = [&] {
    ++runs;
    loop.RunAt(env.MonotonicNow(), again);
  };
  loop.RunAt(env.MonotonicNow(), again);
  ASSERT_TRUE(loop.RunOnce(0ms).ok());
  EXPECT_EQ(runs, 1);
  ASSERT_TRUE(loop.RunOnce(0ms).ok());
  EXPECT_EQ(runs, 2);
}

TEST(EventLoopTest, TicksSeeTheClockAndBoundTheWait) {
  FakeEnv env;
  EventLoop loop(env);
  std::vector<EventLoop::TimePoint> seen;
  std::vector<int> order;
  loop.AddTick([&](EventLoop::TimePoint now) -> std::optional<EventLoop::TimePoint> {
    seen.push_back(now);
    order.push_back(1);
    return std::nullopt;
  });
  loop.AddTick([&](EventLoop::TimePoint now) -> std::optional<EventLoop::TimePoint> {
    order.push_back(2);
    return now;  // due now: the poll must not wait
  });
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(loop.RunOnce(EventLoop::kForever).ok());
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1s) << "a tick due now bounds the wait";
  env.Advance(3s);
  ASSERT_TRUE(loop.RunOnce(0ms).ok());
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[1] - seen[0], 3s);
  EXPECT_EQ(order, (std::vector<int>{1, 2, 1, 2}));
}

TEST(EventLoopTest, ANextTimerBoundsTheWait) {
  FakeEnv env;
  EventLoop loop(env);
  bool fired = false;
  loop.RunAt(env.MonotonicNow() + 50ms, [&] { fired = true; });
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(loop.RunOnce(EventLoop::kForever).ok());  // waits 50 ms of real time, no more
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_GE(waited, 50ms);
  EXPECT_LT(waited, 5s);
  EXPECT_FALSE(fired) << "the fake clock has not moved";
  env.Advance(50ms);
  ASSERT_TRUE(loop.RunOnce(0ms).ok());
  EXPECT_TRUE(fired);
}

TEST(EventLoopTest, StopEndsTheIterationAndRun) {
  FakeEnv env;
  EventLoop loop(env);
  Pipe signals, requests;
  int request_calls = 0, ticks = 0;
  loop.AddTick([&](EventLoop::TimePoint) -> std::optional<EventLoop::TimePoint> {
    ++ticks;
    return std::nullopt;
  });
  // As a daemon does: the signal source first, so a stop leaves pending requests unread.
  loop.AddFd(signals.read_fd(), EventLoop::kReadable, [&](short) { loop.Stop(); });
  loop.AddFd(requests.read_fd(), EventLoop::kReadable, [&](short) { ++request_calls; });
  requests.Write();
  signals.Write();
  ASSERT_TRUE(loop.Run().ok());
  EXPECT_TRUE(loop.stopped());
  EXPECT_EQ(request_calls, 0);
  EXPECT_EQ(ticks, 1);

  signals.Drain();  // a later RunOnce goes on
  ASSERT_TRUE(loop.RunOnce(0ms).ok());
  EXPECT_FALSE(loop.stopped());
  EXPECT_EQ(request_calls, 1);
}

TEST(EventLoopTest, StopFromATickSkipsThePoll) {
  FakeEnv env;
  EventLoop loop(env);
  Pipe ready;
  ready.Write();
  bool polled = false;
  loop.AddTick([&](EventLoop::TimePoint) -> std::optional<EventLoop::TimePoint> {
    loop.Stop();
    return std::nullopt;
  });
  loop.AddFd(ready.read_fd(), EventLoop::kReadable, [&](short) { polled = true; });
  ASSERT_TRUE(loop.Run().ok());
  EXPECT_FALSE(polled);
}

TEST(EventLoopTest, NegativeFdIsNeverReady) {
  FakeEnv env;
  EventLoop loop(env);
  bool called = false;
  loop.AddFd(-1, EventLoop::kReadable, [&](short) { called = true; });
  ASSERT_TRUE(loop.RunOnce(0ms).ok());
  EXPECT_FALSE(called);
}

TEST(EventLoopTest, AnInterruptedPollIsAnEmptyIteration) {
  FakeEnv env;
  EventLoop loop(env);
  struct sigaction action = {};
  action.sa_handler = [](int) {};
  struct sigaction old;
  ASSERT_EQ(sigaction(SIGUSR1, &action, &old), 0);  // no SA_RESTART: poll returns EINTR
  std::thread interrupter;
  const pthread_t self = pthread_self();
  interrupter = std::thread([self] {
    std::this_thread::sleep_for(100ms);
    pthread_kill(self, SIGUSR1);
  });
  const auto start = std::chrono::steady_clock::now();
  Status s = loop.RunOnce(10s);
  interrupter.join();
  sigaction(SIGUSR1, &old, nullptr);
  EXPECT_TRUE(s.ok()) << s.message();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
}

}  // namespace
}  // namespace trainlet::platform
