// PollItemSource on a real EventLoop over pipes: what the component asks for is polled, what it
// stops asking for is not, and a ready item reaches OnPolled with its revents.
#include "agent/poll_item_source.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <set>
#include <vector>

#include "common/platform/event_loop.h"
#include "tests/common/fake_env.h"

namespace trainlet::agent {
namespace {

using std::chrono::milliseconds;

class Pipe {
 public:
  Pipe() { EXPECT_EQ(pipe(fds_), 0); }
  ~Pipe() {
    close(fds_[0]);
    close(fds_[1]);
  }
  int read_end() const { return fds_[0]; }
  void Write() { EXPECT_EQ(write(fds_[1], "x", 1), 1); }
  void Drain() {
    char c;
    EXPECT_EQ(read(fds_[0], &c, 1), 1);
  }

 private:
  int fds_[2];
};

// A component as ExecSessions and HealthChecker are: it says which descriptors it waits for, and
// finds its own among the polled items.
struct Component {
  std::set<int> wanted;
  std::vector<std::vector<zmq_pollitem_t>> polled;  // every OnPolled call's items

  void AddPollItems(std::vector<zmq_pollitem_t>& items) const {
    for (int fd : wanted) items.push_back({nullptr, fd, ZMQ_POLLIN, 0});
  }
  short ReventsOf(size_t call, int fd) const {
    for (const auto& item : polled.at(call)) {
      if (item.fd == fd) return item.revents;
    }
    return -1;
  }
};

class PollItemSourceTest : public ::testing::Test {
 protected:
  PollItemSourceTest()
      : loop_(env_),
        source_(std::make_unique<PollItemSource>(
            loop_, [this](std::vector<zmq_pollitem_t>& items) { component_.AddPollItems(items); },
            [this](const std::vector<zmq_pollitem_t>& items) {
              component_.polled.push_back(items);
            })) {}

  testing::FakeEnv env_;
  platform::EventLoop loop_;
  Component component_;
  std::unique_ptr<PollItemSource> source_;
};

TEST_F(PollItemSourceTest, AReadyItemReachesOnPolledWithItsEvents) {
  Pipe a, b;
  component_.wanted = {a.read_end(), b.read_end()};
  b.Write();
  ASSERT_TRUE(loop_.RunOnce(milliseconds(1000)).ok());
  EXPECT_EQ(source_->registered(), 2u);
  ASSERT_EQ(component_.polled.size(), 1u);
  EXPECT_EQ(component_.ReventsOf(0, b.read_end()), ZMQ_POLLIN);
  EXPECT_EQ(component_.ReventsOf(0, a.read_end()), 0);
}

TEST_F(PollItemSourceTest, WhatIsNoLongerAskedForIsNotPolled) {
  Pipe a;
  component_.wanted = {a.read_end()};
  ASSERT_TRUE(loop_.RunOnce(milliseconds(0)).ok());
  EXPECT_EQ(source_->registered(), 1u);
  component_.wanted.clear();
  a.Write();
  ASSERT_TRUE(loop_.RunOnce(milliseconds(50)).ok());
  EXPECT_EQ(source_->registered(), 0u);
  EXPECT_TRUE(component_.polled.empty());
  // Asked for again: polled again, and the byte still waits.
  component_.wanted = {a.read_end()};
  ASSERT_TRUE(loop_.RunOnce(milliseconds(1000)).ok());
  ASSERT_EQ(component_.polled.size(), 1u);
  a.Drain();
}

TEST_F(PollItemSourceTest, AnItemAddedByAnEarlierTickIsPolledInTheSameIteration) {
  Pipe a;
  a.Write();
  // Ticks run in registration order: a tick added before the source's own (as the agent's main
  // tick starts a health program) hands its new descriptor over before the poll.
  source_.reset();
  loop_.AddTick([&](platform::EventLoop::TimePoint) {
    component_.wanted = {a.read_end()};
    return std::optional<platform::EventLoop::TimePoint>();
  });
  source_ = std::make_unique<PollItemSource>(
      loop_, [this](std::vector<zmq_pollitem_t>& items) { component_.AddPollItems(items); },
      [this](const std::vector<zmq_pollitem_t>& items) { component_.polled.push_back(items); });
  ASSERT_TRUE(loop_.RunOnce(milliseconds(1000)).ok());
  EXPECT_EQ(component_.polled.size(), 1u);
}

TEST_F(PollItemSourceTest, DestroyingItRemovesItsSourcesFromTheLoop) {
  Pipe a;
  component_.wanted = {a.read_end()};
  ASSERT_TRUE(loop_.RunOnce(milliseconds(0)).ok());
  source_.reset();
  a.Write();
  ASSERT_TRUE(loop_.RunOnce(milliseconds(50)).ok());
  EXPECT_TRUE(component_.polled.empty());
}

}  // namespace
}  // namespace trainlet::agent
