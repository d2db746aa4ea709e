// The pure progress rules (coordinator/job_progress.h): durations, the stall policy, the fold of
// one update, the stall verdict and the write coalescing.
#include "coordinator/job_progress.h"

#include <gtest/gtest.h>

#include <climits>

#include "coordinator/job_state_machine.h"

namespace trainlet::coordinator {
namespace {

using std::chrono::milliseconds;

constexpr int64_t kT0 = 1'700'000'000'000;

TEST(ParseGoDuration, TakesGoForms) {
  EXPECT_EQ(*ParseGoDuration("90s"), milliseconds(90'000));
  EXPECT_EQ(*ParseGoDuration("10m"), milliseconds(600'000));
  EXPECT_EQ(*ParseGoDuration("1h30m"), milliseconds(5'400'000));
  EXPECT_EQ(*ParseGoDuration("1.5h"), milliseconds(5'400'000));
  EXPECT_EQ(*ParseGoDuration("250ms"), milliseconds(250));
  EXPECT_EQ(*ParseGoDuration("2s500ms"), milliseconds(2'500));
  EXPECT_EQ(*ParseGoDuration("1500000us"), milliseconds(1'500));
}

TEST(ParseGoDuration, RefusesEverythingElse) {
  for (const char* bad : {"", "10", "m", "10 m", " 10m", "10m ", "-5s", "+5s", "10min", "1d", "5S",
                          "0s", "0", ".s", "1..5s", "10000000h", "1h-5m", "abc"}) {
    auto r = ParseGoDuration(bad);
    EXPECT_FALSE(r.ok()) << "\"" << bad << "\" parsed as " << r->count() << " ms";
  }
  EXPECT_NE(ParseGoDuration("10").status().message().find("90s, 10m or 1h30m"), std::string::npos);
}

TEST(FormatSeconds, IsGoLike) {
  EXPECT_EQ(FormatSeconds(0), "0s");
  EXPECT_EQ(FormatSeconds(45), "45s");
  EXPECT_EQ(FormatSeconds(190), "3m10s");
  EXPECT_EQ(FormatSeconds(7205), "2h0m5s");
  EXPECT_EQ(FormatSeconds(-3), "0s");
}

trainjob::TrainJob Job(std::map<std::string, std::string> annotations) {
  trainjob::TrainJob j;
  j.name = "train";
  j.annotations = std::move(annotations);
  return j;
}

trainjob::TrainingRuntime Runtime(std::map<std::string, std::string> labels = {}) {
  trainjob::TrainingRuntime rt;
  rt.kind = "ClusterTrainingRuntime";
  rt.name = "torch";
  rt.labels = std::move(labels);
  return rt;
}

TEST(StallPolicyOf, OffUnlessAsked) {
  auto p = StallPolicyOf(Job({}), Runtime());
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->timeout.count(), 0);
  EXPECT_FALSE(p->restart);
}

TEST(StallPolicyOf, AnnotationWinsOverTheRuntimeLabel) {
  auto p = StallPolicyOf(
      Job({{"trainlet.io/progress-timeout", "2s"}, {"trainlet.io/on-stall", "restart"}}),
      Runtime({{"trainlet.io/progress-timeout", "10m"}}));
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->timeout, milliseconds(2000));
  EXPECT_TRUE(p->restart);
  EXPECT_EQ(p->source, "trainlet.io/progress-timeout: 2s");

  auto d = StallPolicyOf(Job({}), Runtime({{"trainlet.io/progress-timeout", "10m"}}));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->timeout, milliseconds(600'000));
  EXPECT_NE(d->source.find("runtime torch"), std::string::npos);
}

TEST(StallPolicyOf, BadValuesNameTheAnnotation) {
  auto t = StallPolicyOf(Job({{"trainlet.io/progress-timeout", "10 minutes"}}), Runtime());
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find(
                "TrainJob/train: metadata.annotations[trainlet.io/progress-timeout]"),
            std::string::npos)
      << t.status().message();
  EXPECT_NE(t.status().message().find("\"10 minutes\""), std::string::npos);

  auto o = StallPolicyOf(Job({{"trainlet.io/on-stall", "reboot"}}), Runtime());
  ASSERT_FALSE(o.ok());
  EXPECT_NE(o.status().message().find("metadata.annotations[trainlet.io/on-stall]"),
            std::string::npos);

  auto r = StallPolicyOf(Job({}), Runtime({{"trainlet.io/progress-timeout", "ten"}}));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(
                "ClusterTrainingRuntime/torch: metadata.labels[trainlet.io/progress-timeout]"),
            std::string::npos);
}

v1::JobStatus Running(uint32_t attempt = 2) {
  v1::JobStatus st;
  st.set_name("train");
  st.set_job_phase(v1::JOB_PHASE_RUNNING);
  st.set_attempt(attempt);
  st.add_placement("n1");
  st.add_placement("n2");
  return st;
}

v1::JobProgress Update(uint32_t attempt, int percent) {
  v1::JobProgress u;
  u.set_job("train");
  u.set_attempt(attempt);
  u.mutable_status()->set_progress_percentage(percent);
  auto* m = u.mutable_status()->add_metrics();
  m->set_name("loss");
  m->set_value("0.5");
  return u;
}

TEST(FoldProgress, TakesTheCurrentAttemptStampingItWithTheCoordinatorsClock) {
  v1::JobStatus st = Running();
  ASSERT_EQ(FoldProgress(&st, "n2", Update(2, 42), kT0), ProgressFoldResult::kTaken);
  EXPECT_EQ(st.trainer_status().progress_percentage(), 42);
  EXPECT_EQ(st.trainer_status().attempt(), 2u);
  EXPECT_EQ(st.trainer_status().received_unix_ms(), kT0);
  EXPECT_EQ(st.trainer_status().last_updated_unix_ms(), kT0);  // the rank gave none
  EXPECT_EQ(st.trainer_status().metrics(0).name(), "loss");

  v1::JobProgress later = Update(2, 50);
  later.mutable_status()->set_last_updated_unix_ms(kT0 + 10);
  ASSERT_EQ(FoldProgress(&st, "n1", later, kT0 + 500), ProgressFoldResult::kTaken);
  EXPECT_EQ(st.trainer_status().progress_percentage(), 50);
  EXPECT_EQ(st.trainer_status().last_updated_unix_ms(), kT0 + 10);
  EXPECT_EQ(st.trainer_status().received_unix_ms(), kT0 + 500);
}

TEST(FoldProgress, DropsStaleAttemptsUnknownJobsAndForeignNodes) {
  v1::JobStatus st = Running();
  EXPECT_EQ(FoldProgress(nullptr, "n1", Update(2, 42), kT0), ProgressFoldResult::kUnknownJob);
  EXPECT_EQ(FoldProgress(&st, "n1", Update(1, 42), kT0), ProgressFoldResult::kStaleAttempt);
  EXPECT_EQ(FoldProgress(&st, "n1", Update(3, 42), kT0), ProgressFoldResult::kStaleAttempt);
  EXPECT_EQ(FoldProgress(&st, "n1", Update(0, 42), kT0), ProgressFoldResult::kStaleAttempt);
  EXPECT_EQ(FoldProgress(&st, "n9", Update(2, 42), kT0), ProgressFoldResult::kForeignNode);
  EXPECT_FALSE(st.has_trainer_status());
  st.set_job_phase(v1::JOB_PHASE_SUCCEEDED);
  EXPECT_EQ(FoldProgress(&st, "n1", Update(2, 42), kT0), ProgressFoldResult::kStaleAttempt);
  st.set_job_phase(v1::JOB_PHASE_RUNNING);
  st.set_deleting(true);
  EXPECT_EQ(FoldProgress(&st, "n1", Update(2, 42), kT0), ProgressFoldResult::kStaleAttempt);
  EXPECT_FALSE(st.has_trainer_status());
}

TEST(FoldProgress, DropsWhatIsOutsideKubeflowsLimits) {
  v1::JobStatus st = Running();
  v1::JobProgress u = Update(2, 101);
  EXPECT_EQ(FoldProgress(&st, "n1", u, kT0), ProgressFoldResult::kInvalid);
  u = Update(2, -1);
  EXPECT_EQ(FoldProgress(&st, "n1", u, kT0), ProgressFoldResult::kInvalid);
  u = Update(2, 50);
  u.mutable_status()->set_estimated_remaining_seconds(-5);
  EXPECT_EQ(FoldProgress(&st, "n1", u, kT0), ProgressFoldResult::kInvalid);
  u = Update(2, 50);
  u.mutable_status()->add_metrics()->set_value("nameless");
  EXPECT_EQ(FoldProgress(&st, "n1", u, kT0), ProgressFoldResult::kInvalid);
  u = Update(2, 100);
  while (u.status().metrics_size() < kMaxTrainerMetrics) {
    auto* m = u.mutable_status()->add_metrics();
    m->set_name("m" + std::to_string(u.status().metrics_size()));
    m->set_value("1");
  }
  EXPECT_EQ(FoldProgress(&st, "n1", u, kT0), ProgressFoldResult::kTaken);  // 256: the limit
  u.mutable_status()->add_metrics()->set_name("one-too-many");
  EXPECT_EQ(FoldProgress(&st, "n1", u, kT0 + 1), ProgressFoldResult::kInvalid);
  EXPECT_EQ(st.trainer_status().received_unix_ms(), kT0);  // the valid one stays
  EXPECT_STREQ(ProgressFoldResultName(ProgressFoldResult::kInvalid), "invalid");
}

StallPolicy Policy(int64_t ms, bool restart = false) {
  return {milliseconds(ms), restart, "trainlet.io/progress-timeout: 2s"};
}

TEST(JudgeStall, StallsAfterTheTimeoutFromRunningWithoutUpdates) {
  const v1::JobStatus st = Running();
  EXPECT_EQ(JudgeStall(st, Policy(2000), kT0, kT0 + 1999).action, StallVerdict::Action::kNone);
  const StallVerdict v = JudgeStall(st, Policy(2000), kT0, kT0 + 2000);
  EXPECT_EQ(v.action, StallVerdict::Action::kStalled);
  EXPECT_NE(v.message.find("for 2s"), std::string::npos) << v.message;
  EXPECT_NE(v.message.find("trainlet.io/progress-timeout: 2s"), std::string::npos);
  EXPECT_EQ(StallDeadlineMs(st, Policy(2000), kT0), kT0 + 2000);
  // Off, not Running, or Running not yet seen: never.
  EXPECT_EQ(JudgeStall(st, Policy(0), kT0, kT0 + 99'999).action, StallVerdict::Action::kNone);
  EXPECT_EQ(StallDeadlineMs(st, Policy(0), kT0), INT64_MAX);
  EXPECT_EQ(StallDeadlineMs(st, Policy(2000), INT64_MAX), INT64_MAX);
  v1::JobStatus restarting = st;
  restarting.set_job_phase(v1::JOB_PHASE_RESTARTING);
  EXPECT_EQ(JudgeStall(restarting, Policy(2000), kT0, kT0 + 9999).action,
            StallVerdict::Action::kNone);
  EXPECT_EQ(StallDeadlineMs(restarting, Policy(2000), kT0), INT64_MAX);
}

TEST(JudgeStall, UpdatesOfTheCurrentAttemptMoveTheClock) {
  v1::JobStatus st = Running();
  ASSERT_EQ(FoldProgress(&st, "n1", Update(2, 10), kT0 + 1500), ProgressFoldResult::kTaken);
  EXPECT_EQ(StallDeadlineMs(st, Policy(2000), kT0), kT0 + 3500);
  EXPECT_EQ(JudgeStall(st, Policy(2000), kT0, kT0 + 3000).action, StallVerdict::Action::kNone);
  EXPECT_EQ(JudgeStall(st, Policy(2000), kT0, kT0 + 3500).action, StallVerdict::Action::kStalled);
  // An old attempt's update (a coordinator that did not clear it) does not count.
  st.mutable_trainer_status()->set_attempt(1);
  EXPECT_EQ(StallDeadlineMs(st, Policy(2000), kT0), kT0 + 2000);
}

TEST(JudgeStall, ResumesWhenProgressComesBack) {
  v1::JobStatus st = Running();
  SetCondition(st, kConditionStalled, true, kReasonProgressTimeout, "x", kT0 + 2000);
  ASSERT_TRUE(IsStalled(st));
  EXPECT_EQ(StallDeadlineMs(st, Policy(2000), kT0), INT64_MAX);  // already stalled
  EXPECT_EQ(JudgeStall(st, Policy(2000), kT0, kT0 + 5000).action, StallVerdict::Action::kNone);
  ASSERT_EQ(FoldProgress(&st, "n1", Update(2, 10), kT0 + 5000), ProgressFoldResult::kTaken);
  const StallVerdict v = JudgeStall(st, Policy(2000), kT0, kT0 + 5100);
  EXPECT_EQ(v.action, StallVerdict::Action::kResumed);
  EXPECT_NE(v.message.find("progress reported 0s ago"), std::string::npos) << v.message;
}

TEST(ProgressWatch, RunningClockIsPerAttempt) {
  ProgressWatch w;
  EXPECT_EQ(w.RunningSince("train", 1), INT64_MAX);
  EXPECT_EQ(w.SeeRunning("train", 1, kT0), kT0);
  EXPECT_EQ(w.SeeRunning("train", 1, kT0 + 500), kT0);  // the first sight counts
  EXPECT_EQ(w.RunningSince("train", 1), kT0);
  EXPECT_EQ(w.SeeRunning("train", 2, kT0 + 900), kT0 + 900);  // a new attempt: a new clock
  EXPECT_EQ(w.RunningSince("train", 1), INT64_MAX);
  w.Forget("train");
  EXPECT_EQ(w.RunningSince("train", 2), INT64_MAX);
}

TEST(ProgressWatch, CoalescesWritesToOnePerInterval) {
  ProgressWatch w;
  EXPECT_FALSE(w.TakeWriteDue("train", kT0));  // nothing waits
  EXPECT_EQ(w.NextWriteMs(), INT64_MAX);
  w.OnTaken("train");
  EXPECT_TRUE(w.TakeWriteDue("train", kT0));  // the first update is written at once
  EXPECT_FALSE(w.TakeWriteDue("train", kT0));
  // Ten updates in the next second: one write, when the second is up.
  int writes = 0;
  for (int i = 1; i <= 10; ++i) {
    w.OnTaken("train");
    writes += w.TakeWriteDue("train", kT0 + i * 100);
  }
  EXPECT_EQ(writes, 1);  // at kT0 + 1000
  w.OnTaken("train");
  EXPECT_EQ(w.NextWriteMs(), kT0 + 2000);
  EXPECT_FALSE(w.TakeWriteDue("train", kT0 + 1999));
  EXPECT_TRUE(w.TakeWriteDue("train", kT0 + 2000));
  EXPECT_EQ(w.NextWriteMs(), INT64_MAX);
}

}  // namespace
}  // namespace trainlet::coordinator
