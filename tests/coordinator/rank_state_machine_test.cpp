#include "coordinator/rank_state_machine.h"

#include <gtest/gtest.h>

#include <set>
#include <tuple>
#include <vector>

namespace trainlet::coordinator {
namespace {

using S = v1::RankState;
using T = RankTrigger;
using R = v1::AttemptResult;
using A = AttemptTrigger;

const std::vector<S> kAllStates = {v1::RANK_STATE_PENDING,      v1::RANK_STATE_RUNNING,
                                   v1::RANK_STATE_SUCCEEDED,    v1::RANK_STATE_FAILED,
                                   v1::RANK_STATE_START_FAILED, v1::RANK_STATE_LOST,
                                   v1::RANK_STATE_STOPPED,      v1::RANK_STATE_UNSPECIFIED};
const std::vector<T> kAllTriggers = {T::kStarted,     T::kExitedZero, T::kExitedNonZero,
                                     T::kStartFailed, T::kNodeLost,   T::kAttemptStopped};

// A rank's life written out independently of the header's table, so a slip in either shows.
const std::set<std::tuple<S, T, S>> kExpectedRank = {
    {v1::RANK_STATE_PENDING, T::kStarted, v1::RANK_STATE_RUNNING},
    {v1::RANK_STATE_PENDING, T::kExitedZero, v1::RANK_STATE_SUCCEEDED},
    {v1::RANK_STATE_PENDING, T::kExitedNonZero, v1::RANK_STATE_FAILED},
    {v1::RANK_STATE_PENDING, T::kStartFailed, v1::RANK_STATE_START_FAILED},
    {v1::RANK_STATE_PENDING, T::kNodeLost, v1::RANK_STATE_LOST},
    {v1::RANK_STATE_PENDING, T::kAttemptStopped, v1::RANK_STATE_STOPPED},
    {v1::RANK_STATE_RUNNING, T::kExitedZero, v1::RANK_STATE_SUCCEEDED},
    {v1::RANK_STATE_RUNNING, T::kExitedNonZero, v1::RANK_STATE_FAILED},
    {v1::RANK_STATE_RUNNING, T::kStartFailed, v1::RANK_STATE_START_FAILED},
    {v1::RANK_STATE_RUNNING, T::kNodeLost, v1::RANK_STATE_LOST},
    {v1::RANK_STATE_LOST, T::kExitedZero, v1::RANK_STATE_SUCCEEDED},
    {v1::RANK_STATE_LOST, T::kExitedNonZero, v1::RANK_STATE_FAILED},
    {v1::RANK_STATE_LOST, T::kStartFailed, v1::RANK_STATE_START_FAILED},
    {v1::RANK_STATE_STOPPED, T::kExitedZero, v1::RANK_STATE_SUCCEEDED},
    {v1::RANK_STATE_STOPPED, T::kExitedNonZero, v1::RANK_STATE_FAILED},
    {v1::RANK_STATE_STOPPED, T::kStartFailed, v1::RANK_STATE_START_FAILED},
};

TEST(RankStateMachine, EveryPairMatchesTheExpectedLife) {
  int allowed = 0;
  for (S from : kAllStates) {
    for (T t : kAllTriggers) {
      std::optional<S> to = NextRankState(from, t);
      bool expected = false;
      for (const auto& [f, tr, dest] : kExpectedRank) {
        if (f == from && tr == t) {
          expected = true;
          ASSERT_TRUE(to.has_value()) << RankStateName(from) << " + " << RankTriggerName(t);
          EXPECT_EQ(*to, dest) << RankStateName(from) << " + " << RankTriggerName(t);
        }
      }
      if (!expected) {
        EXPECT_FALSE(to.has_value())
            << RankStateName(from) << " + " << RankTriggerName(t) << " should be forbidden";
      }
      allowed += to.has_value();
    }
  }
  EXPECT_EQ(allowed, static_cast<int>(kExpectedRank.size()));
  EXPECT_EQ(kRankTransitions.size(), kExpectedRank.size());  // no duplicate rows
}

TEST(RankStateMachine, NodeReportsAreFinal) {
  for (S final : {v1::RANK_STATE_SUCCEEDED, v1::RANK_STATE_FAILED, v1::RANK_STATE_START_FAILED}) {
    for (T t : kAllTriggers) EXPECT_FALSE(NextRankState(final, t)) << RankStateName(final);
  }
  // A repeat "started" for a running rank changes nothing.
  EXPECT_FALSE(NextRankState(v1::RANK_STATE_RUNNING, T::kStarted));
  // A rank that ran cannot be "stopped before it started".
  EXPECT_FALSE(NextRankState(v1::RANK_STATE_RUNNING, T::kAttemptStopped));
}

TEST(ApplyRankTrigger, MovesOrRefusesLeavingTheRankAsItWas) {
  v1::RankStatus r;
  r.set_rank(3);
  r.set_node("n2");
  r.set_rank_state(v1::RANK_STATE_PENDING);
  ASSERT_TRUE(ApplyRankTrigger(r, T::kStarted).ok());
  EXPECT_EQ(r.rank_state(), v1::RANK_STATE_RUNNING);
  ASSERT_TRUE(ApplyRankTrigger(r, T::kExitedNonZero).ok());
  EXPECT_EQ(r.rank_state(), v1::RANK_STATE_FAILED);

  const std::string before = r.SerializeAsString();
  Status s = ApplyRankTrigger(r, T::kExitedZero);
  EXPECT_EQ(s.code(), ErrorCode::kInvalid);
  EXPECT_NE(s.message().find("rank 3 on n2"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("ExitedZero"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("Failed"), std::string::npos) << s.message();
  EXPECT_EQ(r.SerializeAsString(), before);
}

TEST(RankStateMachine, ActiveIsPendingOrRunning) {
  for (S s : kAllStates) {
    EXPECT_EQ(IsRankActive(s), s == v1::RANK_STATE_PENDING || s == v1::RANK_STATE_RUNNING)
        << RankStateName(s);
  }
}

TEST(RankStateMachine, NamesAreTheOldStoredSpellings) {
  const std::vector<std::pair<S, const char*>> old = {
      {v1::RANK_STATE_PENDING, "Pending"},          {v1::RANK_STATE_RUNNING, "Running"},
      {v1::RANK_STATE_SUCCEEDED, "Succeeded"},      {v1::RANK_STATE_FAILED, "Failed"},
      {v1::RANK_STATE_START_FAILED, "StartFailed"}, {v1::RANK_STATE_LOST, "Lost"},
      {v1::RANK_STATE_STOPPED, "Stopped"}};
  for (const auto& [s, name] : old) {
    EXPECT_STREQ(RankStateName(s), name);
    EXPECT_EQ(ParseRankState(name), s);
  }
  EXPECT_FALSE(ParseRankState("").has_value());
  EXPECT_FALSE(ParseRankState("Unspecified").has_value());
  EXPECT_FALSE(ParseRankState("running").has_value());
}

const std::vector<R> kAllResults = {v1::ATTEMPT_RESULT_UNSPECIFIED, v1::ATTEMPT_RESULT_SUCCEEDED,
                                    v1::ATTEMPT_RESULT_FAILED, v1::ATTEMPT_RESULT_STOPPED};
const std::vector<A> kAllAttemptTriggers = {A::kAllRanksSucceeded, A::kFailed, A::kStopped};

TEST(AttemptStateMachine, EndsOnceAndEveryResultIsFinal) {
  const std::set<std::tuple<R, A, R>> expected = {
      {kAttemptRunning, A::kAllRanksSucceeded, v1::ATTEMPT_RESULT_SUCCEEDED},
      {kAttemptRunning, A::kFailed, v1::ATTEMPT_RESULT_FAILED},
      {kAttemptRunning, A::kStopped, v1::ATTEMPT_RESULT_STOPPED},
  };
  int allowed = 0;
  for (R from : kAllResults) {
    for (A t : kAllAttemptTriggers) {
      std::optional<R> to = NextAttemptResult(from, t);
      bool listed = false;
      for (const auto& [f, tr, dest] : expected) {
        if (f == from && tr == t) {
          listed = true;
          ASSERT_TRUE(to.has_value());
          EXPECT_EQ(*to, dest);
        }
      }
      if (!listed) EXPECT_FALSE(to.has_value()) << from << " + " << AttemptTriggerName(t);
      allowed += to.has_value();
    }
  }
  EXPECT_EQ(allowed, 3);
  EXPECT_EQ(kAttemptResultTransitions.size(), expected.size());
}

TEST(ApplyAttemptTrigger, SecondEndIsRefused) {
  v1::AttemptRecord a;
  a.set_attempt(2);
  EXPECT_FALSE(AttemptEnded(a));
  ASSERT_TRUE(ApplyAttemptTrigger(a, A::kStopped).ok());
  EXPECT_TRUE(AttemptEnded(a));
  EXPECT_EQ(a.attempt_result(), v1::ATTEMPT_RESULT_STOPPED);
  Status s = ApplyAttemptTrigger(a, A::kFailed);
  EXPECT_EQ(s.code(), ErrorCode::kInvalid);
  EXPECT_NE(s.message().find("attempt 2"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("Stopped"), std::string::npos) << s.message();
  EXPECT_EQ(a.attempt_result(), v1::ATTEMPT_RESULT_STOPPED);
}

TEST(AttemptStateMachine, NamesAreTheOldStoredSpellings) {
  EXPECT_STREQ(AttemptResultName(kAttemptRunning), "");
  EXPECT_STREQ(AttemptResultName(v1::ATTEMPT_RESULT_SUCCEEDED), "Succeeded");
  EXPECT_STREQ(AttemptResultName(v1::ATTEMPT_RESULT_FAILED), "Failed");
  EXPECT_STREQ(AttemptResultName(v1::ATTEMPT_RESULT_STOPPED), "Stopped");
  for (R r : kAllResults) EXPECT_EQ(ParseAttemptResult(AttemptResultName(r)), r);
  EXPECT_FALSE(ParseAttemptResult("Running").has_value());
}

}  // namespace
}  // namespace trainlet::coordinator
