// JobController with training progress (coordinator/job_progress_steps.cpp): ProgressReports
// folded into the status, dropped when stale, written at most once a second, and the stall rule
// on the controller's clock (Schedule's now), with its restart.
#include <gtest/gtest.h>

#include <climits>

#include "controller_fixture.h"
#include "coordinator/job_progress.h"

namespace trainlet::coordinator::testing {
namespace {

std::string Annotated(const std::string& yaml, const std::string& name,
                      const std::vector<std::pair<std::string, std::string>>& annotations) {
  std::string lines = "  annotations:\n";
  for (const auto& [k, v] : annotations) lines += "    " + k + ": \"" + v + "\"\n";
  const std::string anchor = "  name: " + name + "\n";
  std::string out = yaml;
  out.insert(out.find(anchor) + anchor.size(), lines);
  return out;
}

v1::ProgressReport ReportOf(const std::string& job, uint32_t attempt, int percent) {
  v1::ProgressReport r;
  auto* u = r.add_updates();
  u->set_job(job);
  u->set_attempt(attempt);
  u->mutable_status()->set_progress_percentage(percent);
  u->mutable_status()->set_estimated_remaining_seconds(100 - percent);
  return r;
}

class ProgressSteps : public ControllerFixture {
 protected:
  // Applies `name` (2 nodes x 1 rank) with `annotations` and brings it to Running at kT0.
  void StartRunning(const std::string& name,
                    const std::vector<std::pair<std::string, std::string>>& annotations) {
    ApplyOk(Annotated(JobYaml(name, 2, 1), name, annotations));
    controller_->Schedule(kT0);
    ReportAll(name, v1::WorkerEvent::KIND_STARTED, kT0);
    controller_->Schedule(kT0);  // the stall clock starts when Schedule sees it Running
    ASSERT_EQ(PhaseName(JobOrDie(name)), "Running");
    ASSERT_TRUE(controller_->Flush().ok());
  }
  std::string Node(const std::string& job) { return JobOrDie(job).placement(0); }
};

TEST_F(ProgressSteps, CurrentAttemptIsTakenOthersAreDropped) {
  StartRunning("train", {});
  auto r = controller_->OnProgressReport(Node("train"), ReportOf("train", 1, 42), kT0 + 100);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0], ProgressFoldResult::kTaken);
  EXPECT_EQ(JobOrDie("train").trainer_status().progress_percentage(), 42);
  EXPECT_EQ(JobOrDie("train").trainer_status().received_unix_ms(), kT0 + 100);

  v1::ProgressReport mixed = ReportOf("train", 7, 99);  // an attempt that is not current
  *mixed.add_updates() = ReportOf("gone", 1, 99).updates(0);
  r = controller_->OnProgressReport(Node("train"), mixed, kT0 + 200);
  EXPECT_EQ(r, (std::vector{ProgressFoldResult::kStaleAttempt, ProgressFoldResult::kUnknownJob}));
  r = controller_->OnProgressReport("n3-not-placed", ReportOf("train", 1, 99), kT0 + 200);
  EXPECT_EQ(r, std::vector{ProgressFoldResult::kForeignNode});
  EXPECT_EQ(JobOrDie("train").trainer_status().progress_percentage(), 42);
}

TEST_F(ProgressSteps, WritesAreCoalescedToOnePerSecond) {
  StartRunning("train", {});
  const std::string node = Node("train");
  controller_->OnProgressReport(node, ReportOf("train", 1, 1), kT0 + 100);
  ASSERT_TRUE(controller_->Flush().ok());
  EXPECT_EQ(Stored("train")->status.trainer_status().progress_percentage(), 1);  // the first: now
  // Reports every 100 ms: memory follows each, the store only once the second is up.
  for (int i = 2; i <= 9; ++i) {
    controller_->OnProgressReport(node, ReportOf("train", 1, i), kT0 + i * 100);
    controller_->Schedule(kT0 + i * 100);
    ASSERT_TRUE(controller_->Flush().ok());
    EXPECT_EQ(JobOrDie("train").trainer_status().progress_percentage(), i);
    EXPECT_EQ(Stored("train")->status.trainer_status().progress_percentage(), 1) << i;
  }
  EXPECT_EQ(controller_->NextWakeMs(), kT0 + 1100);  // Schedule wakes for the pending write
  controller_->Schedule(kT0 + 1100);
  ASSERT_TRUE(controller_->Flush().ok());
  EXPECT_EQ(Stored("train")->status.trainer_status().progress_percentage(), 9);
}

TEST_F(ProgressSteps, StalledConditionIsSetAndClearedOnTheClock) {
  StartRunning("train", {{"trainlet.io/progress-timeout", "2s"}});
  EXPECT_EQ(controller_->NextWakeMs(), kT0 + 2000);
  controller_->Schedule(kT0 + 1999);
  EXPECT_EQ(Cond(JobOrDie("train"), "Stalled"), nullptr);
  controller_->Schedule(kT0 + 2000);
  const v1::Condition* c = Cond(JobOrDie("train"), "Stalled");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->status(), "True");
  EXPECT_EQ(c->reason(), "ProgressTimeout");
  EXPECT_NE(c->message().find("for 2s"), std::string::npos) << c->message();
  const auto& ev = *JobOrDie("train").events().rbegin();
  EXPECT_EQ(ev.type(), "Warning");
  EXPECT_EQ(ev.reason(), "Stalled");
  EXPECT_EQ(PhaseName(JobOrDie("train")), "Running");  // on-stall defaults to none
  EXPECT_TRUE(sink_.Stops().empty());
  ASSERT_TRUE(controller_->Flush().ok());
  EXPECT_EQ(Cond(Stored("train")->status, "Stalled")->status(), "True");

  controller_->OnProgressReport(Node("train"), ReportOf("train", 1, 50), kT0 + 5000);
  c = Cond(JobOrDie("train"), "Stalled");
  EXPECT_EQ(c->status(), "False");
  EXPECT_EQ(c->reason(), "ProgressResumed");
  EXPECT_EQ(controller_->NextWakeMs(), kT0 + 7000);  // the update was written: only the timeout
  controller_->Schedule(kT0 + 7000);
  EXPECT_EQ(Cond(JobOrDie("train"), "Stalled")->status(), "True");
}

TEST_F(ProgressSteps, OnStallRestartFailsTheAttemptAndANewOneStarts) {
  StartRunning("train", {{"trainlet.io/progress-timeout", "2s"},
                         {"trainlet.io/on-stall", "restart"},
                         {"trainlet.io/max-restarts", "1"}});
  controller_->OnProgressReport(Node("train"), ReportOf("train", 1, 30), kT0 + 500);
  controller_->Schedule(kT0 + 2500);
  const v1::JobStatus& st = JobOrDie("train");
  EXPECT_EQ(PhaseName(st), "Restarting");
  EXPECT_EQ(Cond(st, "Stalled")->status(), "True");
  ASSERT_EQ(st.attempts_size(), 1);
  EXPECT_EQ(ResultName(st.attempts(0)), "Failed");
  EXPECT_EQ(st.attempts(0).cause().rfind("Stalled: ", 0), 0u) << st.attempts(0).cause();
  EXPECT_EQ(sink_.StopNodes().size(), 2u);  // every rank of the stalled attempt is stopped

  ReportAll("train", v1::WorkerEvent::KIND_EXITED, kT0 + 2600, 0, 15);
  controller_->Schedule(kT0 + 3000);  // past the 250 ms backoff
  EXPECT_EQ(JobOrDie("train").attempt(), 2u);
  EXPECT_FALSE(JobOrDie("train").has_trainer_status());  // attempt 1's progress is gone
  ReportAll("train", v1::WorkerEvent::KIND_STARTED, kT0 + 3100);
  controller_->Schedule(kT0 + 3100);
  EXPECT_EQ(PhaseName(JobOrDie("train")), "Running");
  EXPECT_EQ(Cond(JobOrDie("train"), "Stalled")->status(), "False");  // a new attempt runs
  // Attempt 1's late report is dropped; the new attempt stalls on its own clock, and with no
  // restarts left the job fails.
  EXPECT_EQ(controller_->OnProgressReport(Node("train"), ReportOf("train", 1, 90), kT0 + 3200),
            std::vector{ProgressFoldResult::kStaleAttempt});
  controller_->Schedule(kT0 + 5100);
  EXPECT_EQ(PhaseName(JobOrDie("train")), "Failed");
}

TEST_F(ProgressSteps, ApplyRefusesBadAnnotationsNamingThem) {
  for (const auto& [key, value] : std::vector<std::pair<std::string, std::string>>{
           {"trainlet.io/progress-timeout", "10"}, {"trainlet.io/on-stall", "reboot"}}) {
    auto r =
        controller_->Apply(Annotated(JobYaml("bad", 1, 1), "bad", {{key, value}}), "bad.yaml", kT0);
    ASSERT_FALSE(r.ok()) << key;
    EXPECT_NE(r.status().message().find("metadata.annotations[" + key + "]"), std::string::npos)
        << r.status().message();
    EXPECT_EQ(controller_->Find("bad"), nullptr);
  }
}

TEST_F(ProgressSteps, NoTimeoutNoStall) {
  StartRunning("train", {});
  EXPECT_EQ(controller_->NextWakeMs(), INT64_MAX);
  controller_->Schedule(kT0 + 3'600'000);
  EXPECT_EQ(Cond(JobOrDie("train"), "Stalled"), nullptr);
}

}  // namespace
}  // namespace trainlet::coordinator::testing
