#include "coordinator/job_state_machine.h"

#include <gtest/gtest.h>

#include <set>
#include <tuple>
#include <vector>

namespace trainlet::coordinator {
namespace {

using P = JobPhase;
using T = JobTrigger;

const std::vector<P> kAllPhases = {P::kPending,   P::kStarting, P::kRunning,  P::kRestarting,
                                   P::kSucceeded, P::kFailed,   P::kSuspended};
const std::vector<T> kAllTriggers = {
    T::kPlaced,           T::kUnplaceable,        T::kAllRanksStarted, T::kAllRanksSucceeded,
    T::kAttemptFailed,    T::kAttemptFailedFinal, T::kSuspend,         T::kResume,
    T::kDeadlineExceeded, T::kPlanRefused};

// The lifecycle written out independently of the header's table, so a slip in either shows.
const std::set<std::tuple<P, T, P>> kExpected = {
    {P::kPending, T::kPlaced, P::kStarting},
    {P::kRestarting, T::kPlaced, P::kStarting},
    {P::kPending, T::kUnplaceable, P::kPending},
    {P::kRestarting, T::kUnplaceable, P::kRestarting},
    {P::kStarting, T::kAllRanksStarted, P::kRunning},
    {P::kStarting, T::kAllRanksSucceeded, P::kSucceeded},
    {P::kRunning, T::kAllRanksSucceeded, P::kSucceeded},
    {P::kStarting, T::kAttemptFailed, P::kRestarting},
    {P::kRunning, T::kAttemptFailed, P::kRestarting},
    {P::kStarting, T::kAttemptFailedFinal, P::kFailed},
    {P::kRunning, T::kAttemptFailedFinal, P::kFailed},
    {P::kPending, T::kSuspend, P::kSuspended},
    {P::kStarting, T::kSuspend, P::kSuspended},
    {P::kRunning, T::kSuspend, P::kSuspended},
    {P::kRestarting, T::kSuspend, P::kSuspended},
    {P::kSuspended, T::kResume, P::kPending},
    {P::kPending, T::kDeadlineExceeded, P::kFailed},
    {P::kStarting, T::kDeadlineExceeded, P::kFailed},
    {P::kRunning, T::kDeadlineExceeded, P::kFailed},
    {P::kRestarting, T::kDeadlineExceeded, P::kFailed},
    {P::kSuspended, T::kDeadlineExceeded, P::kFailed},
    {P::kPending, T::kPlanRefused, P::kFailed},
    {P::kRestarting, T::kPlanRefused, P::kFailed},
};

TEST(JobStateMachine, EveryPairMatchesTheExpectedLifecycle) {
  int allowed = 0;
  for (P from : kAllPhases) {
    for (T t : kAllTriggers) {
      std::optional<P> to = NextPhase(from, t);
      bool expected = false;
      for (const auto& [f, tr, dest] : kExpected) {
        if (f == from && tr == t) {
          expected = true;
          ASSERT_TRUE(to.has_value()) << JobPhaseName(from) << " + " << JobTriggerName(t);
          EXPECT_EQ(*to, dest) << JobPhaseName(from) << " + " << JobTriggerName(t);
        }
      }
      if (!expected) {
        EXPECT_FALSE(to.has_value())
            << JobPhaseName(from) << " + " << JobTriggerName(t) << " should be forbidden";
      }
      allowed += to.has_value();
    }
  }
  EXPECT_EQ(allowed, static_cast<int>(kExpected.size()));
  EXPECT_EQ(kJobTransitions.size(), kExpected.size());
}

TEST(JobStateMachine, TableHasNoDuplicatePairs) {
  std::set<std::pair<P, T>> seen;
  for (const Transition& t : kJobTransitions) {
    EXPECT_TRUE(seen.insert({t.from, t.trigger}).second)
        << JobPhaseName(t.from) << " + " << JobTriggerName(t.trigger) << " listed twice";
  }
}

TEST(JobStateMachine, TerminalPhasesAcceptNothingAndOnlyTheyAreTerminal) {
  for (P p : kAllPhases) {
    bool terminal = p == P::kSucceeded || p == P::kFailed;
    EXPECT_EQ(IsTerminal(p), terminal) << JobPhaseName(p);
    int leaving = 0;
    for (T t : kAllTriggers) leaving += NextPhase(p, t).has_value();
    if (terminal) {
      EXPECT_EQ(leaving, 0) << JobPhaseName(p);
    } else {
      // Every live phase can at least fail on its deadline.
      EXPECT_TRUE(NextPhase(p, T::kDeadlineExceeded).has_value()) << JobPhaseName(p);
    }
  }
}

TEST(JobStateMachine, SampleOfForbiddenMoves) {
  EXPECT_FALSE(NextPhase(P::kPending, T::kAllRanksStarted));
  EXPECT_FALSE(NextPhase(P::kPending, T::kAllRanksSucceeded));
  EXPECT_FALSE(NextPhase(P::kRunning, T::kPlaced));
  EXPECT_FALSE(NextPhase(P::kRunning, T::kResume));
  EXPECT_FALSE(NextPhase(P::kSuspended, T::kPlaced));
  EXPECT_FALSE(NextPhase(P::kSuspended, T::kSuspend));
  EXPECT_FALSE(NextPhase(P::kRestarting, T::kAllRanksStarted));
  EXPECT_FALSE(NextPhase(P::kSucceeded, T::kAttemptFailed));
  EXPECT_FALSE(NextPhase(P::kFailed, T::kResume));
}

TEST(JobStateMachine, PhaseNamesRoundTrip) {
  for (P p : kAllPhases) {
    auto parsed = ParseJobPhase(JobPhaseName(p));
    ASSERT_TRUE(parsed.has_value()) << JobPhaseName(p);
    EXPECT_EQ(*parsed, p);
  }
  EXPECT_STREQ(JobPhaseName(P::kRestarting), "Restarting");
  EXPECT_FALSE(ParseJobPhase("pending"));
  EXPECT_FALSE(ParseJobPhase(""));
  EXPECT_FALSE(ParseJobPhase("Complete"));
}

const v1::Condition* FindCondition(const v1::JobStatus& s, std::string_view type) {
  for (const auto& c : s.conditions()) {
    if (c.type() == type) return &c;
  }
  return nullptr;
}

TEST(ApplyTransition, HappyPathToComplete) {
  v1::JobStatus s;
  s.set_name("hello");
  ASSERT_TRUE(ApplyTransition(s, T::kPlaced, "", "placed on n1,n2", 1000).ok());
  EXPECT_EQ(s.job_phase(), v1::JOB_PHASE_STARTING);
  EXPECT_EQ(s.reason(), "Placed");
  ASSERT_TRUE(ApplyTransition(s, T::kAllRanksStarted, "", "", 2000).ok());
  EXPECT_EQ(s.job_phase(), v1::JOB_PHASE_RUNNING);
  EXPECT_EQ(s.conditions_size(), 0);
  ASSERT_TRUE(
      ApplyTransition(s, T::kAllRanksSucceeded, "Completed", "all 4 ranks exited 0", 3000).ok());
  EXPECT_EQ(s.job_phase(), v1::JOB_PHASE_SUCCEEDED);
  ASSERT_EQ(s.conditions_size(), 1);
  const v1::Condition* c = FindCondition(s, "Complete");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->status(), "True");
  EXPECT_EQ(c->reason(), "Completed");
  EXPECT_EQ(c->message(), "all 4 ranks exited 0");
  EXPECT_EQ(c->unix_ms(), 3000);
  ASSERT_EQ(s.events_size(), 3);
  EXPECT_EQ(s.events(0).reason(), "Placed");
  EXPECT_EQ(s.events(0).type(), "Normal");
  EXPECT_EQ(s.events(0).message(), "placed on n1,n2");
  EXPECT_EQ(s.events(2).unix_ms(), 3000);
}

TEST(ApplyTransition, FailureSetsFailedConditionWithReasonAndWarningEvent) {
  v1::JobStatus s;
  s.set_job_phase(v1::JOB_PHASE_RUNNING);
  ASSERT_TRUE(ApplyTransition(s, T::kAttemptFailed, "RankFailed", "rank 3 exited 2", 10).ok());
  EXPECT_EQ(s.job_phase(), v1::JOB_PHASE_RESTARTING);
  EXPECT_EQ(s.conditions_size(), 0);  // not failed yet: a restart is coming
  EXPECT_EQ(s.events(0).type(), "Warning");
  ASSERT_TRUE(ApplyTransition(s, T::kPlaced, "", "", 20).ok());
  ASSERT_TRUE(ApplyTransition(s, T::kAttemptFailedFinal, "BackoffLimitExceeded",
                              "restart limit 1 reached; rank 0 exited 1", 30)
                  .ok());
  EXPECT_EQ(s.job_phase(), v1::JOB_PHASE_FAILED);
  EXPECT_EQ(s.reason(), "BackoffLimitExceeded");
  const v1::Condition* c = FindCondition(s, "Failed");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->status(), "True");
  EXPECT_EQ(c->reason(), "BackoffLimitExceeded");
  EXPECT_EQ(c->message(), "restart limit 1 reached; rank 0 exited 1");
  EXPECT_EQ(FindCondition(s, "Complete"), nullptr);
  EXPECT_EQ(s.events(s.events_size() - 1).type(), "Warning");
}

TEST(ApplyTransition, SuspendAndResumeFlipTheSuspendedCondition) {
  v1::JobStatus s;
  s.set_job_phase(v1::JOB_PHASE_RUNNING);
  ASSERT_TRUE(ApplyTransition(s, T::kSuspend, "", "spec.suspend is true", 100).ok());
  EXPECT_EQ(s.job_phase(), v1::JOB_PHASE_SUSPENDED);
  const v1::Condition* c = FindCondition(s, "Suspended");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->status(), "True");
  EXPECT_EQ(c->reason(), "Suspended");
  EXPECT_EQ(c->unix_ms(), 100);

  ASSERT_TRUE(ApplyTransition(s, T::kResume, "", "spec.suspend is false", 200).ok());
  EXPECT_EQ(s.job_phase(), v1::JOB_PHASE_PENDING);
  ASSERT_EQ(s.conditions_size(), 1);  // one condition per type, updated in place
  c = FindCondition(s, "Suspended");
  EXPECT_EQ(c->status(), "False");
  EXPECT_EQ(c->reason(), "Resumed");
  EXPECT_EQ(c->unix_ms(), 200);

  // Suspending again flips it back; the time moves because the status changed.
  ASSERT_TRUE(ApplyTransition(s, T::kSuspend, "", "again", 300).ok());
  c = FindCondition(s, "Suspended");
  EXPECT_EQ(c->status(), "True");
  EXPECT_EQ(c->unix_ms(), 300);
}

TEST(ApplyTransition, EmptyPhaseIsPending) {
  v1::JobStatus s;
  EXPECT_FALSE(ApplyTransition(s, T::kAllRanksStarted, "", "", 1).ok());
  ASSERT_TRUE(ApplyTransition(s, T::kDeadlineExceeded, "DeadlineExceeded", "", 1).ok());
  EXPECT_EQ(s.job_phase(), v1::JOB_PHASE_FAILED);
}

TEST(ApplyTransition, ForbiddenMoveChangesNothing) {
  v1::JobStatus s;
  s.set_name("done");
  s.set_job_phase(v1::JOB_PHASE_SUCCEEDED);
  s.set_reason("Completed");
  s.add_events()->set_reason("x");
  const std::string before = s.SerializeAsString();
  for (T t : kAllTriggers) {
    Status st = ApplyTransition(s, t, "r", "m", 5);
    EXPECT_EQ(st.code(), ErrorCode::kInvalid) << JobTriggerName(t);
    EXPECT_NE(st.message().find("trainjob/done"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("Succeeded"), std::string::npos) << st.message();
  }
  EXPECT_EQ(s.SerializeAsString(), before);
}

// A phase that is not one (a newer trainlet's, or corruption) never reaches the table: JobStore
// refuses such records as it reads them (stored_status_test.cpp), so one here is a bug.
TEST(ApplyTransitionDeathTest, UnknownPhaseStops) {
  v1::JobStatus s;
  s.set_name("odd");
  s.set_job_phase(static_cast<v1::JobPhase>(42));
  EXPECT_DEATH((void)ApplyTransition(s, T::kPlaced, "", "", 1), "job_phase 42");
  EXPECT_DEATH((void)PhaseOf(s), "trainjob/odd");
}

TEST(PhaseOf, ReadsTheEnumAndUnsetAsPending) {
  v1::JobStatus s;
  EXPECT_EQ(PhaseOf(s), P::kPending);
  for (P p : kAllPhases) {
    s.set_job_phase(static_cast<v1::JobPhase>(p));
    EXPECT_EQ(PhaseOf(s), p);
    EXPECT_TRUE(IsJobPhase(static_cast<int>(p)));
  }
  EXPECT_FALSE(IsJobPhase(v1::JOB_PHASE_UNSPECIFIED));
  EXPECT_FALSE(IsJobPhase(8));
  // The old string field is never read past the store.
  s.clear_job_phase();
  s.set_phase("Running");
  EXPECT_EQ(PhaseOf(s), P::kPending);
}

TEST(JobPhaseName, NamesRoundTripAndMatchOldRecords) {
  for (P p : kAllPhases) EXPECT_EQ(ParseJobPhase(JobPhaseName(p)), p);
  EXPECT_STREQ(JobPhaseName(P::kRestarting), "Restarting");
  EXPECT_FALSE(ParseJobPhase("running").has_value());
  EXPECT_FALSE(ParseJobPhase("").has_value());
}

TEST(ApplyTransition, EventsAreBounded) {
  v1::JobStatus s;
  s.set_job_phase(v1::JOB_PHASE_RUNNING);
  for (int i = 0; i < 150; ++i) {
    ASSERT_TRUE(ApplyTransition(s, T::kAttemptFailed, "", "attempt " + std::to_string(i), i).ok());
    ASSERT_TRUE(ApplyTransition(s, T::kPlaced, "", "", i).ok());
    ASSERT_TRUE(ApplyTransition(s, T::kAllRanksStarted, "", "", i).ok());
  }
  ASSERT_EQ(s.events_size(), kMaxJobEvents);
  // The newest survive, in order.
  EXPECT_EQ(s.events(kMaxJobEvents - 1).reason(), "AllRanksStarted");
  EXPECT_EQ(s.events(kMaxJobEvents - 3).message(), "attempt 149");
}

TEST(ApplyTransition, RepeatedUnplaceableRefreshesInsteadOfFlooding) {
  v1::JobStatus s;
  for (int i = 1; i <= 50; ++i) {
    ASSERT_TRUE(ApplyTransition(s, T::kUnplaceable, "Unschedulable", "needs 4 nodes", i).ok());
  }
  EXPECT_EQ(s.job_phase(), v1::JOB_PHASE_PENDING);
  EXPECT_EQ(s.reason(), "Unschedulable");
  ASSERT_EQ(s.events_size(), 1);
  EXPECT_EQ(s.events(0).unix_ms(), 50);
  EXPECT_EQ(s.events(0).type(), "Warning");
  ASSERT_TRUE(ApplyTransition(s, T::kUnplaceable, "Unschedulable", "needs 3 nodes", 51).ok());
  EXPECT_EQ(s.events_size(), 2);
}

}  // namespace
}  // namespace trainlet::coordinator
