#include "coordinator/fence_table.h"

#include <gtest/gtest.h>

#include <set>

namespace trainlet::coordinator {
namespace {

using Clock = FenceTable::Clock;

class FenceTableTest : public ::testing::Test {
 protected:
  FenceTableTest()
      : table_([this](const std::string& job,
                      uint32_t attempt) -> std::optional<std::vector<std::string>> {
          if (job != "j" || attempt != live_attempt_) return std::nullopt;
          return placement_;
        }) {}

  v1::FenceContribute Contribution(const std::string& node, uint64_t epoch,
                                   std::map<std::string, std::string> puts = {},
                                   uint32_t attempt = 1) {
    v1::FenceContribute c;
    c.set_job("j");
    c.set_attempt(attempt);
    c.set_epoch(epoch);
    c.set_node(node);
    for (const auto& [k, v] : puts) {
      auto* kv = c.add_puts();
      kv->set_key(k);
      kv->set_value(v);
    }
    return c;
  }
  static v1::WorkerEvent Exit(uint32_t rank, int code, int signal) {
    v1::WorkerEvent ev;
    ev.set_job("j");
    ev.set_attempt(1);
    ev.set_rank(rank);
    ev.set_kind(v1::WorkerEvent::KIND_EXITED);
    ev.set_exit_code(code);
    ev.set_signal(signal);
    return ev;
  }
  static std::map<std::string, std::string> Pairs(const FenceTable::Send& s) {
    std::map<std::string, std::string> out;
    for (const auto& kv : s.envelope.fence_result().pairs()) out[kv.key()] = kv.value();
    return out;
  }

  std::vector<std::string> placement_ = {"a", "b", "c"};
  uint32_t live_attempt_ = 1;
  FenceTable table_;
  Clock::time_point t0_ = Clock::now();
};

TEST_F(FenceTableTest, ReleasesEveryNodeOnceAllContributed) {
  auto out = table_.OnContribute("a", Contribution("a", 1, {{"addr/0", "A"}}), t0_);
  EXPECT_TRUE(out.sends.empty());
  out = table_.OnContribute("b", Contribution("b", 1, {{"addr/1", "B"}}), t0_);
  EXPECT_TRUE(out.sends.empty());
  out = table_.OnContribute("c", Contribution("c", 1, {{"addr/2", "C"}}),
                            t0_ + std::chrono::milliseconds(5));
  ASSERT_EQ(out.sends.size(), 3u);
  ASSERT_TRUE(out.fence_time.has_value());
  EXPECT_NEAR(out.fence_time->count(), 0.005, 1e-6);
  std::set<std::string> nodes;
  for (const auto& s : out.sends) {
    nodes.insert(s.node);
    const auto& r = s.envelope.fence_result();
    EXPECT_TRUE(r.ok());
    EXPECT_EQ(r.epoch(), 1u);
    EXPECT_EQ(Pairs(s), (std::map<std::string, std::string>{
                            {"addr/0", "A"}, {"addr/1", "B"}, {"addr/2", "C"}}));
  }
  EXPECT_EQ(nodes, (std::set<std::string>{"a", "b", "c"}));

  // Fence 2 carries everything put so far; a clash goes to the later node of the placement.
  table_.OnContribute("c", Contribution("c", 2, {{"x", "from-c"}}), t0_);
  table_.OnContribute("a", Contribution("a", 2, {{"x", "from-a"}, {"addr/0", "A2"}}), t0_);
  out = table_.OnContribute("b", Contribution("b", 2), t0_);
  ASSERT_EQ(out.sends.size(), 3u);
  EXPECT_EQ(Pairs(out.sends[0]),
            (std::map<std::string, std::string>{
                {"addr/0", "A2"}, {"addr/1", "B"}, {"addr/2", "C"}, {"x", "from-c"}}));
}

TEST_F(FenceTableTest, RejectsStrangersDuplicatesAndWrongEpochs) {
  auto out = table_.OnContribute("z", Contribution("a", 1), t0_);
  EXPECT_EQ(out.rejected.code(), ErrorCode::kPermission);
  EXPECT_TRUE(out.sends.empty());
  // The node field is not believed: "z" claiming to be "a" did not count for a.
  out = table_.OnContribute("a", Contribution("a", 2), t0_);
  EXPECT_EQ(out.rejected.code(), ErrorCode::kInvalid);
  EXPECT_TRUE(table_.OnContribute("a", Contribution("a", 1), t0_).rejected.ok());
  EXPECT_EQ(table_.OnContribute("a", Contribution("a", 1), t0_).rejected.code(),
            ErrorCode::kInvalid);
  table_.OnContribute("b", Contribution("b", 1), t0_);
  EXPECT_EQ(table_.OnContribute("c", Contribution("c", 1), t0_).sends.size(), 3u);
}

// A node's agent restarted (kill -9) after the fence it had contributed to was released, so the
// result may never have reached its ranks: their fence, sent again to the new agent and from it
// here, is answered again with every pair, to that node only.
TEST_F(FenceTableTest, ReleasedFenceContributedAgainIsAnsweredAgain) {
  table_.OnContribute("a", Contribution("a", 1, {{"addr/0", "A"}}), t0_);
  table_.OnContribute("b", Contribution("b", 1, {{"addr/1", "B"}}), t0_);
  ASSERT_EQ(table_.OnContribute("c", Contribution("c", 1), t0_).sends.size(), 3u);
  auto out = table_.OnContribute("b", Contribution("b", 1, {{"addr/1", "B"}}), t0_);
  EXPECT_TRUE(out.rejected.ok()) << out.rejected.message();
  ASSERT_EQ(out.sends.size(), 1u);
  EXPECT_EQ(out.sends[0].node, "b");
  EXPECT_TRUE(out.sends[0].envelope.fence_result().ok());
  EXPECT_EQ(out.sends[0].envelope.fence_result().epoch(), 1u);
  EXPECT_EQ(Pairs(out.sends[0]),
            (std::map<std::string, std::string>{{"addr/0", "A"}, {"addr/1", "B"}}));
  // The next fence goes on as usual.
  EXPECT_TRUE(table_.OnContribute("b", Contribution("b", 2), t0_).sends.empty());
}

// A publish outside a fence goes to every node of the placement at once, and later fence
// results carry it (an empty value removed it).
TEST_F(FenceTableTest, PublishGoesToEveryNodeAndIntoLaterFences) {
  v1::RendezvousPublish p;
  p.set_job("j");
  p.set_attempt(1);
  auto* kv = p.add_pairs();
  kv->set_key("pmix.pub/svc");
  kv->set_value("port");
  EXPECT_EQ(table_.OnPublish("z", p).rejected.code(), ErrorCode::kPermission);
  auto out = table_.OnPublish("b", p);
  ASSERT_TRUE(out.rejected.ok());
  ASSERT_EQ(out.sends.size(), 3u);
  std::set<std::string> nodes;
  for (const auto& s : out.sends) {
    nodes.insert(s.node);
    EXPECT_EQ(s.envelope.rendezvous_publish().node(), "b");
    EXPECT_EQ(s.envelope.rendezvous_publish().pairs(0).value(), "port");
  }
  EXPECT_EQ(nodes, (std::set<std::string>{"a", "b", "c"}));
  table_.OnContribute("a", Contribution("a", 1, {{"addr/0", "A"}}), t0_);
  table_.OnContribute("b", Contribution("b", 1), t0_);
  out = table_.OnContribute("c", Contribution("c", 1), t0_);
  ASSERT_EQ(out.sends.size(), 3u);
  EXPECT_EQ(Pairs(out.sends[0]),
            (std::map<std::string, std::string>{{"addr/0", "A"}, {"pmix.pub/svc", "port"}}));
  kv->set_value("");
  table_.OnPublish("a", p);
  table_.OnContribute("a", Contribution("a", 2), t0_);
  table_.OnContribute("b", Contribution("b", 2), t0_);
  out = table_.OnContribute("c", Contribution("c", 2), t0_);
  ASSERT_EQ(out.sends.size(), 3u);
  EXPECT_EQ(Pairs(out.sends[0]), (std::map<std::string, std::string>{{"addr/0", "A"}}));
  live_attempt_ = 2;  // the attempt ended: nothing goes anywhere
  EXPECT_TRUE(table_.OnPublish("a", p).sends.empty());
}

TEST_F(FenceTableTest, ContributionForAnEndedAttemptIsAnsweredNotOk) {
  auto out = table_.OnContribute("a", Contribution("a", 1, {}, /*attempt=*/7), t0_);
  ASSERT_EQ(out.sends.size(), 1u);
  EXPECT_EQ(out.sends[0].node, "a");
  EXPECT_FALSE(out.sends[0].envelope.fence_result().ok());
  EXPECT_NE(out.sends[0].envelope.fence_result().message().find("not running"), std::string::npos);
}

TEST_F(FenceTableTest, RankExitDuringOpenFenceFailsEveryNode) {
  table_.OnContribute("a", Contribution("a", 1), t0_);
  table_.OnContribute("b", Contribution("b", 1), t0_);
  table_.OnContribute("c", Contribution("c", 1), t0_);
  table_.OnContribute("a", Contribution("a", 2), t0_);
  table_.OnContribute("c", Contribution("c", 2), t0_);
  auto out = table_.OnWorkerEvent("b", Exit(5, 0, 9));
  ASSERT_EQ(out.sends.size(), 3u);
  for (const auto& s : out.sends) {
    EXPECT_FALSE(s.envelope.fence_result().ok());
    EXPECT_EQ(s.envelope.fence_result().message(),
              "rank 5 on b exited with signal 9 before joining fence 2");
  }
  // Later contributions fail at once, with the same reason.
  out = table_.OnContribute("b", Contribution("b", 2), t0_);
  ASSERT_EQ(out.sends.size(), 1u);
  EXPECT_FALSE(out.sends[0].envelope.fence_result().ok());
  EXPECT_NE(out.sends[0].envelope.fence_result().message().find("rank 5 on b"), std::string::npos);
}

TEST_F(FenceTableTest, ExitBeforeAnyFenceFailsTheFirstOne) {
  EXPECT_TRUE(table_.OnWorkerEvent("c", Exit(8, 3, 0)).sends.empty());
  auto out = table_.OnContribute("a", Contribution("a", 1), t0_);
  ASSERT_EQ(out.sends.size(), 3u);
  EXPECT_EQ(out.sends[0].envelope.fence_result().message(),
            "rank 8 on c exited with code 3 before joining fence 1");
}

TEST_F(FenceTableTest, ExitAfterItsNodeContributedDoesNotFailThatFence) {
  table_.OnContribute("a", Contribution("a", 1), t0_);
  // A rank of a, which has joined fence 1, ends (its work done): fence 1 still completes.
  EXPECT_TRUE(table_.OnWorkerEvent("a", Exit(0, 0, 0)).sends.empty());
  table_.OnContribute("b", Contribution("b", 1), t0_);
  auto out = table_.OnContribute("c", Contribution("c", 1), t0_);
  ASSERT_EQ(out.sends.size(), 3u);
  EXPECT_TRUE(out.sends[0].envelope.fence_result().ok());
  // But no later fence can complete without it.
  out = table_.OnContribute("b", Contribution("b", 2), t0_);
  ASSERT_EQ(out.sends.size(), 3u);
  EXPECT_FALSE(out.sends[0].envelope.fence_result().ok());
  EXPECT_NE(out.sends[0].envelope.fence_result().message().find("before joining fence 2"),
            std::string::npos);
}

TEST_F(FenceTableTest, SweepFailsAndForgetsEndedAttempts) {
  table_.OnContribute("a", Contribution("a", 1), t0_);
  EXPECT_TRUE(table_.Sweep().sends.empty());  // still live
  EXPECT_EQ(table_.size(), 1u);
  live_attempt_ = 2;
  auto out = table_.Sweep();
  ASSERT_EQ(out.sends.size(), 3u);
  EXPECT_FALSE(out.sends[0].envelope.fence_result().ok());
  EXPECT_NE(out.sends[0].envelope.fence_result().message().find("attempt 1 of j ended"),
            std::string::npos);
  EXPECT_EQ(table_.size(), 0u);
  // An attempt whose ranks exited but never fenced is forgotten without a word to the nodes.
  live_attempt_ = 1;
  table_.OnWorkerEvent("a", Exit(0, 0, 0));
  EXPECT_EQ(table_.size(), 1u);
  live_attempt_ = 3;
  EXPECT_TRUE(table_.Sweep().sends.empty());
  EXPECT_EQ(table_.size(), 0u);
}

TEST_F(FenceTableTest, StartedEventsAreIgnored) {
  v1::WorkerEvent ev = Exit(1, 0, 0);
  ev.set_kind(v1::WorkerEvent::KIND_STARTED);
  table_.OnWorkerEvent("a", ev);
  EXPECT_EQ(table_.size(), 0u);
}

// After a restart or failover the table is empty; each node resyncs what it knows when it
// registers (FenceContribute.resync).
class FenceTableResyncTest : public FenceTableTest {
 protected:
  v1::FenceContribute Resync(const std::string& node, uint64_t released,
                             std::map<std::string, std::string> released_pairs, uint64_t epoch = 0,
                             std::map<std::string, std::string> puts = {}) {
    v1::FenceContribute c = Contribution(node, epoch, std::move(puts));
    c.set_resync(true);
    c.set_released(released);
    for (const auto& [k, v] : released_pairs) {
      auto* kv = c.add_released_pairs();
      kv->set_key(k);
      kv->set_value(v);
    }
    return c;
  }
  const std::map<std::string, std::string> fence1_ = {
      {"addr/0", "A"}, {"addr/1", "B"}, {"addr/2", "C"}};
};

TEST_F(FenceTableResyncTest, AFenceInFlightAcrossARestartCompletesWithEveryEarlierPair) {
  // Fence 1 was released before the restart; every node had joined fence 2 when it came.
  auto out = table_.OnContribute("a", Resync("a", 1, fence1_, 2, {{"x", "a"}}), t0_);
  EXPECT_TRUE(out.sends.empty());
  EXPECT_TRUE(out.rejected.ok()) << out.rejected.message();
  table_.OnContribute("b", Resync("b", 1, fence1_, 2, {{"y", "b"}}), t0_);
  out = table_.OnContribute("c", Resync("c", 1, fence1_, 2), t0_);
  ASSERT_EQ(out.sends.size(), 3u);
  for (const auto& s : out.sends) {
    EXPECT_TRUE(s.envelope.fence_result().ok());
    EXPECT_EQ(s.envelope.fence_result().epoch(), 2u);
    auto want = fence1_;
    want["x"] = "a";
    want["y"] = "b";
    EXPECT_EQ(Pairs(s), want);
  }
  // And fence 3 goes on from there, as on the old coordinator.
  table_.OnContribute("a", Contribution("a", 3), t0_);
  table_.OnContribute("b", Contribution("b", 3), t0_);
  out = table_.OnContribute("c", Contribution("c", 3, {{"z", "c"}}), t0_);
  ASSERT_EQ(out.sends.size(), 3u);
  EXPECT_EQ(Pairs(out.sends[0]).count("addr/2"), 1u);
  EXPECT_EQ(Pairs(out.sends[0]).at("z"), "c");
}

TEST_F(FenceTableResyncTest, AReleaseThatReachedSomeNodesOnlyReachesTheRest) {
  // The old coordinator released fence 2 to a only, then died. b and c resync their fence-2
  // contribution: in either order relative to a's resync, they get fence 2 with a's pairs.
  auto fence2 = fence1_;
  fence2["x"] = "a";
  auto out = table_.OnContribute("b", Resync("b", 1, fence1_, 2, {}), t0_);
  EXPECT_TRUE(out.sends.empty());  // nothing says fence 2 was released yet
  out = table_.OnContribute("a", Resync("a", 2, fence2), t0_);
  ASSERT_EQ(out.sends.size(), 1u);
  EXPECT_EQ(out.sends[0].node, "b");
  EXPECT_EQ(out.sends[0].envelope.fence_result().epoch(), 2u);
  EXPECT_EQ(Pairs(out.sends[0]), fence2);
  out = table_.OnContribute("c", Resync("c", 1, fence1_, 2, {}), t0_);
  ASSERT_EQ(out.sends.size(), 1u);
  EXPECT_EQ(out.sends[0].node, "c");
  EXPECT_EQ(Pairs(out.sends[0]), fence2);
  // The three then meet at fence 3.
  table_.OnContribute("a", Contribution("a", 3), t0_);
  table_.OnContribute("b", Contribution("b", 3), t0_);
  out = table_.OnContribute("c", Contribution("c", 3), t0_);
  EXPECT_EQ(out.sends.size(), 3u);
}

TEST_F(FenceTableResyncTest, ARepeatOnTheSameCoordinatorChangesNothing) {
  table_.OnContribute("a", Contribution("a", 1, {{"addr/0", "A"}}), t0_);
  table_.OnContribute("b", Contribution("b", 1, {{"addr/1", "B"}}), t0_);
  // a re-registers (a blip): its resync repeats its join; fence 1 still waits for c.
  auto out = table_.OnContribute("a", Resync("a", 0, {}, 1, {{"addr/0", "A"}}), t0_);
  EXPECT_TRUE(out.sends.empty());
  EXPECT_TRUE(out.rejected.ok()) << out.rejected.message();
  out = table_.OnContribute("c", Contribution("c", 1, {{"addr/2", "C"}}), t0_);
  ASSERT_EQ(out.sends.size(), 3u);
  EXPECT_EQ(Pairs(out.sends[0]), fence1_);
}

TEST_F(FenceTableResyncTest, WithoutResyncAFenceAfterARestartIsRefused) {
  // What a restarted coordinator did before resync: fence 2 from an empty table is refused, and
  // the ranks would wait for a release that never comes.
  auto out = table_.OnContribute("a", Contribution("a", 2), t0_);
  EXPECT_FALSE(out.rejected.ok());
  EXPECT_TRUE(out.sends.empty());
}

TEST_F(FenceTableResyncTest, AResyncOfAnEndedAttemptFailsItsFence) {
  live_attempt_ = 2;
  auto out = table_.OnContribute("a", Resync("a", 1, fence1_, 2), t0_);
  ASSERT_EQ(out.sends.size(), 1u);
  EXPECT_FALSE(out.sends[0].envelope.fence_result().ok());
}

}  // namespace
}  // namespace trainlet::coordinator
