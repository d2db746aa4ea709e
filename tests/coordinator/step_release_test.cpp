// Issue 18: JobSet's dependsOn across the nodes of an attempt (coordinator/step_release.h). On
// main a node started its `node` ranks once its own initializer finished, while another node's
// still ran; here the dependent workers are held out of the plans and sent once the dependency is
// met on every node.
#include "coordinator/step_release.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace trainlet::coordinator {
namespace {

using ::testing::ElementsAre;

v1::StepDependency Need(const std::string& step, const std::string& status) {
  v1::StepDependency d;
  d.set_step(step);
  d.set_status(status);
  return d;
}

// One plan per node: a `node` rank and a dataset-initializer worker, `node` waiting for the
// initializer to be Complete.
std::vector<v1::LaunchPlan> Plans(size_t nodes) {
  std::vector<v1::LaunchPlan> plans(nodes);
  for (size_t n = 0; n < nodes; ++n) {
    v1::LaunchPlan& p = plans[n];
    p.set_job("j");
    p.set_attempt(1);
    p.set_node_rank(static_cast<uint32_t>(n));
    p.set_job_uid("uid");
    p.add_workers()->set_rank(static_cast<uint32_t>(n));
    auto* init = p.add_workers();
    init->set_rank(static_cast<uint32_t>(nodes + n));
    init->set_step("dataset-initializer");
    auto* waits = p.add_steps();
    waits->set_name("");
    *waits->add_depends_on() = Need("dataset-initializer", "Complete");
  }
  return plans;
}

v1::JobStatus Status(size_t nodes) {
  v1::JobStatus st;
  st.set_name("j");
  st.set_attempt(1);
  for (size_t n = 0; n < nodes; ++n) st.add_placement("n" + std::to_string(n));
  for (size_t n = 0; n < nodes; ++n) {
    auto* r = st.add_ranks();
    r->set_rank(static_cast<uint32_t>(n));
    r->set_node("n" + std::to_string(n));
    r->set_rank_state(v1::RANK_STATE_PENDING);
  }
  for (size_t n = 0; n < nodes; ++n) {
    auto* r = st.add_ranks();
    r->set_rank(static_cast<uint32_t>(nodes + n));
    r->set_node("n" + std::to_string(n));
    r->set_step("dataset-initializer");
    r->set_rank_state(v1::RANK_STATE_RUNNING);
  }
  return st;
}

std::vector<uint32_t> Ranks(const v1::LaunchPlan& p) {
  std::vector<uint32_t> out;
  for (const auto& w : p.workers()) out.push_back(w.rank());
  return out;
}

TEST(DependencyMetEverywhere, ReadyAndCompleteCountEveryNode) {
  v1::JobStatus st = Status(2);
  EXPECT_TRUE(DependencyMetEverywhere(st, Need("dataset-initializer", "Ready")));
  EXPECT_FALSE(DependencyMetEverywhere(st, Need("dataset-initializer", "Complete")));
  st.mutable_ranks(2)->set_rank_state(v1::RANK_STATE_SUCCEEDED);  // n0's is done
  EXPECT_FALSE(DependencyMetEverywhere(st, Need("dataset-initializer", "Complete")));
  st.mutable_ranks(3)->set_rank_state(v1::RANK_STATE_SUCCEEDED);
  EXPECT_TRUE(DependencyMetEverywhere(st, Need("dataset-initializer", "Complete")));
  EXPECT_FALSE(DependencyMetEverywhere(st, Need("", "Ready")));  // the main ranks are Pending
  EXPECT_TRUE(DependencyMetEverywhere(st, Need("no-such-job", "Complete")));
}

TEST(StepRelease, OneNodeHoldsNothing) {
  StepRelease release;
  auto plans = Plans(1);
  release.Hold("j", 1, {"n0"}, plans);
  EXPECT_THAT(Ranks(plans[0]), ElementsAre(0u, 1u));  // trainlet-step's own gate holds rank 0
  EXPECT_FALSE(release.Holding("j", 1));
}

TEST(StepRelease, TheWaitingWorkersGoOnlyOnceTheDependencyIsMetOnEveryNode) {
  StepRelease release;
  auto plans = Plans(2);
  release.Hold("j", 1, {"n0", "n1"}, plans);
  EXPECT_THAT(Ranks(plans[0]), ElementsAre(2u));  // the initializers go now
  EXPECT_THAT(Ranks(plans[1]), ElementsAre(3u));
  EXPECT_TRUE(release.Holding("j", 1));

  v1::JobStatus st = Status(2);
  EXPECT_TRUE(release.Release(st).empty());
  // n0's initializer is done first: n0's ranks still wait for n1's.
  st.mutable_ranks(2)->set_rank_state(v1::RANK_STATE_SUCCEEDED);
  EXPECT_TRUE(release.Release(st).empty());
  st.mutable_ranks(3)->set_rank_state(v1::RANK_STATE_SUCCEEDED);
  auto sent = release.Release(st);
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_EQ(sent[0].first, "n0");
  EXPECT_THAT(Ranks(sent[0].second), ElementsAre(0u));
  EXPECT_EQ(sent[0].second.job_uid(), "uid");  // the attempt's plan, with only its workers
  EXPECT_EQ(sent[0].second.node_rank(), 0u);
  EXPECT_EQ(sent[1].first, "n1");
  EXPECT_THAT(Ranks(sent[1].second), ElementsAre(1u));
  EXPECT_FALSE(release.Holding("j", 1));
  EXPECT_TRUE(release.Release(st).empty());  // once

  // n1 missed it (disconnected): sent again when it registers, while its rank is Pending.
  auto again = release.Unstarted(st, "n1");
  ASSERT_EQ(again.size(), 1u);
  EXPECT_THAT(Ranks(again[0]), ElementsAre(1u));
  st.mutable_ranks(1)->set_rank_state(v1::RANK_STATE_RUNNING);
  EXPECT_TRUE(release.Unstarted(st, "n1").empty());
}

TEST(StepRelease, AnotherAttemptOrAForgottenJobReleasesNothing) {
  StepRelease release;
  auto plans = Plans(2);
  release.Hold("j", 1, {"n0", "n1"}, plans);
  v1::JobStatus st = Status(2);
  for (int i = 2; i < 4; ++i) st.mutable_ranks(i)->set_rank_state(v1::RANK_STATE_SUCCEEDED);
  st.set_attempt(2);
  EXPECT_TRUE(release.Release(st).empty());
  st.set_attempt(1);
  release.Forget("j");
  EXPECT_TRUE(release.Release(st).empty());
}

// The attempt stops (the other node's initializer failed): the held ranks never had a plan, so
// no agent reports them; they end here, and nothing is released afterwards.
TEST(StepRelease, AStoppedAttemptsHeldRanksEndHereAndAreNeverReleased) {
  StepRelease release;
  auto plans = Plans(2);
  release.Hold("j", 1, {"n0", "n1"}, plans);
  v1::JobStatus st = Status(2);
  st.mutable_ranks(2)->set_rank_state(v1::RANK_STATE_SUCCEEDED);
  st.mutable_ranks(3)->set_rank_state(v1::RANK_STATE_FAILED);
  EXPECT_TRUE(release.EndHeld(st));
  EXPECT_EQ(st.ranks(0).rank_state(), v1::RANK_STATE_STOPPED);
  EXPECT_EQ(st.ranks(1).rank_state(), v1::RANK_STATE_STOPPED);
  EXPECT_EQ(st.ranks(0).message(),
            "never started: the attempt ended before its dependencies were met on every node");
  EXPECT_EQ(st.ranks(2).rank_state(), v1::RANK_STATE_SUCCEEDED);
  st.mutable_ranks(3)->set_rank_state(v1::RANK_STATE_SUCCEEDED);
  EXPECT_TRUE(release.Release(st).empty());
  EXPECT_FALSE(release.EndHeld(st));
}

TEST(StepRelease, APlanRenderedAgainIsStrippedAndKeepsWhatWasHeld) {
  StepRelease release;
  auto plans = Plans(2);
  release.Hold("j", 1, {"n0", "n1"}, plans);
  auto again = Plans(2);
  release.Hold("j", 1, {"n0", "n1"}, again);  // a resend for a node that missed its plan
  EXPECT_THAT(Ranks(again[1]), ElementsAre(3u));
  v1::JobStatus st = Status(2);
  for (int i = 2; i < 4; ++i) st.mutable_ranks(i)->set_rank_state(v1::RANK_STATE_SUCCEEDED);
  EXPECT_EQ(release.Release(st).size(), 2u);  // each node's once
}

// A coordinator restarted (or a new leader) while the main ranks were held: its StepRelease is
// new, and holds nothing. Rebuild, from the plans made again, holds them again and releases them
// once, when every node's initializer has completed. On main nothing held them after a restart:
// they never started and the attempt's start timeout restarted it.
TEST(StepRelease, HeldWorkersAreRebuiltAfterARestartAndReleasedOnce) {
  StepRelease before;
  auto sent = Plans(2);
  before.Hold("j", 1, {"n0", "n1"}, sent);
  ASSERT_TRUE(before.Holding("j", 1));

  StepRelease after;  // the restarted coordinator's
  v1::JobStatus st = Status(2);
  EXPECT_FALSE(after.Knows("j", 1));
  EXPECT_FALSE(after.Holding("j", 1));
  after.Rebuild(st, {"n0", "n1"}, Plans(2));
  EXPECT_TRUE(after.Knows("j", 1));
  EXPECT_TRUE(after.Holding("j", 1));
  EXPECT_TRUE(after.Release(st).empty());  // the initializers still run
  st.mutable_ranks(2)->set_rank_state(v1::RANK_STATE_SUCCEEDED);
  st.mutable_ranks(3)->set_rank_state(v1::RANK_STATE_SUCCEEDED);
  auto released = after.Release(st);
  ASSERT_EQ(released.size(), 2u);
  EXPECT_EQ(released[0].first, "n0");
  EXPECT_THAT(Ranks(released[0].second), ElementsAre(0u));
  EXPECT_EQ(released[1].first, "n1");
  EXPECT_THAT(Ranks(released[1].second), ElementsAre(1u));
  EXPECT_EQ(released[1].second.job_uid(), "uid");
  EXPECT_TRUE(after.Release(st).empty());     // never twice
  after.Rebuild(st, {"n0", "n1"}, Plans(2));  // a second rebuild of a known attempt: nothing
  EXPECT_TRUE(after.Release(st).empty());
  EXPECT_FALSE(after.Holding("j", 1));
}

// The old coordinator had released them before it died: a worker that started is never sent
// again; one still Pending (its plan lost with the coordinator) goes out once.
TEST(StepRelease, ARebuildDropsTheWorkersReleasedBeforeTheRestart) {
  v1::JobStatus st = Status(2);
  st.mutable_ranks(2)->set_rank_state(v1::RANK_STATE_SUCCEEDED);
  st.mutable_ranks(3)->set_rank_state(v1::RANK_STATE_SUCCEEDED);
  st.mutable_ranks(0)->set_rank_state(v1::RANK_STATE_RUNNING);  // n0 got its release
  StepRelease after;
  after.Rebuild(st, {"n0", "n1"}, Plans(2));
  auto released = after.Release(st);
  ASSERT_EQ(released.size(), 1u);
  EXPECT_EQ(released[0].first, "n1");
  EXPECT_THAT(Ranks(released[0].second), ElementsAre(1u));
  EXPECT_TRUE(after.Release(st).empty());

  // Every one started: nothing is held, and nothing ever goes out.
  st.mutable_ranks(1)->set_rank_state(v1::RANK_STATE_SUCCEEDED);
  StepRelease again;
  again.Rebuild(st, {"n0", "n1"}, Plans(2));
  EXPECT_TRUE(again.Knows("j", 1));
  EXPECT_FALSE(again.Holding("j", 1));
  EXPECT_TRUE(again.Release(st).empty());
  EXPECT_TRUE(again.Unstarted(st, "n1").empty());
}

// A held set rebuilt ends like one held from the start when the attempt stops first.
TEST(StepRelease, ARebuiltSetEndsHeldRanksWhenTheAttemptStops) {
  v1::JobStatus st = Status(2);
  StepRelease after;
  after.Rebuild(st, {"n0", "n1"}, Plans(2));
  EXPECT_TRUE(after.EndHeld(st));
  EXPECT_EQ(st.ranks(0).rank_state(), v1::RANK_STATE_STOPPED);
  EXPECT_EQ(st.ranks(1).rank_state(), v1::RANK_STATE_STOPPED);
}

// Plans made again for a node that missed its plan, before the rebuild: stripped of the waiting
// workers, which nothing holds yet; Rebuild holds them later.
TEST(StepRelease, StripTakesOutTheWaitingWorkersAndKeepsNothing) {
  auto plans = Plans(2);
  StepRelease::Strip({"n0", "n1"}, plans);
  EXPECT_THAT(Ranks(plans[0]), ElementsAre(2u));
  EXPECT_THAT(Ranks(plans[1]), ElementsAre(3u));
  auto one = Plans(1);
  StepRelease::Strip({"n0"}, one);
  EXPECT_THAT(Ranks(one[0]), ElementsAre(0u, 1u));
}

}  // namespace
}  // namespace trainlet::coordinator
