// JobController with failure rules and finished jobs: a runtime's failurePolicy.rules and the
// trainlet.io/restart-policy annotation deciding restart or fail, the rule recorded in the
// attempt; ttlSecondsAfterFinished deleting a finished job on time (also after a controller
// restart), and the PurgeJob every node that ran the job gets when its delete completes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "controller_fixture.h"

namespace trainlet::coordinator::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
constexpr auto kStarted = v1::WorkerEvent::KIND_STARTED;
constexpr auto kExited = v1::WorkerEvent::KIND_EXITED;

// A plain runtime with maxRestarts 3, `jobset_extra` inserted under its JobSet spec.
std::string RulesRuntime(const std::string& name, const std::string& jobset_extra) {
  std::string y = RuntimeYaml(name, "", 3);
  const std::string at = "      failurePolicy:\n        maxRestarts: 3\n";
  const size_t pos = y.find(at);
  EXPECT_NE(pos, std::string::npos);
  y.insert(pos + at.size(), jobset_extra);
  return y;
}

const std::string kFailOnUserError =
    "        rules:\n"
    "          - name: failOnUserError\n"
    "            action: FailJobSet\n"
    "            onJobFailureReasons: [BackoffLimitExceeded]\n"
    "            onJobFailureMessagePatterns: [\"exited with code\"]\n"
    "            targetReplicatedJobs: [node]\n";

class FinishedJobsTest : public ControllerFixture {
 protected:
  std::vector<std::string> PurgedNodes(const std::string& job) const {
    std::vector<std::string> nodes;
    for (const auto& [node, env] : sink_.sent) {
      if (env.has_purge_job() && env.purge_job().job() == job) nodes.push_back(node);
    }
    return nodes;
  }
};

TEST_F(FinishedJobsTest, FailJobSetRuleFailsOnTheFirstAttempt) {
  ApplyOk(RulesRuntime("rules", kFailOnUserError) + "---\n" + JobYaml("j", 2, 1, "rules"));
  ReportAll("j", kStarted, kT0 + 10);
  Report("j", 1, kExited, kT0 + 100, 1);
  const v1::JobStatus& st = JobOrDie("j");
  EXPECT_EQ(PhaseName(st), "Failed");
  EXPECT_EQ(st.reason(), "FailedByFailureRule");
  ASSERT_EQ(st.attempts_size(), 1);
  EXPECT_EQ(st.attempts(0).failure_rule(), "failOnUserError (FailJobSet)");
  EXPECT_THAT(st.attempts(0).cause(), HasSubstr("exited with code 1"));
  EXPECT_EQ(st.finished_unix_ms(), kT0 + 100);
  EXPECT_EQ(st.ttl_delete_unix_ms(), 0);  // no TTL anywhere: kept
}

TEST_F(FinishedJobsTest, SignalDoesNotMatchTheExitCodePatternAndRestarts) {
  ApplyOk(RulesRuntime("rules", kFailOnUserError) + "---\n" + JobYaml("j", 2, 1, "rules"));
  ReportAll("j", kStarted, kT0 + 10);
  Report("j", 1, kExited, kT0 + 100, 0, 9);
  const v1::JobStatus& st = JobOrDie("j");
  EXPECT_EQ(PhaseName(st), "Restarting");
  EXPECT_EQ(st.attempts(0).failure_rule(), "");
}

TEST_F(FinishedJobsTest, ExitCodeAnnotation) {
  std::string job = JobYaml("j", 1, 1, "retry");
  job.insert(job.find("spec:"), "  annotations:\n    trainlet.io/restart-policy: ExitCode\n");
  ApplyOk(RuntimeYaml("retry", "", 3) + "---\n" + job);
  ReportAll("j", kStarted, kT0 + 10);
  Report("j", 0, kExited, kT0 + 100, 137);  // 128-255: retried
  EXPECT_EQ(PhaseName(JobOrDie("j")), "Restarting");
  controller_->Schedule(kT0 + 100000);
  ASSERT_EQ(JobOrDie("j").attempt(), 2u);
  ReportAll("j", kStarted, kT0 + 100010);
  Report("j", 0, kExited, kT0 + 100100, 3);  // permanent
  const v1::JobStatus& st = JobOrDie("j");
  EXPECT_EQ(PhaseName(st), "Failed");
  ASSERT_EQ(st.attempts_size(), 2);
  EXPECT_EQ(st.attempts(0).failure_rule(), "");
  EXPECT_EQ(st.attempts(1).failure_rule(), "ExitCode (permanent exit code 3)");
}

TEST_F(FinishedJobsTest, BadRestartPolicyIsRefusedAtApply) {
  std::string job = JobYaml("j", 1, 1);
  job.insert(job.find("spec:"), "  annotations:\n    trainlet.io/restart-policy: Sometimes\n");
  auto r = controller_->Apply(job, "test.yaml", kT0);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(),
              HasSubstr("metadata.annotations[trainlet.io/restart-policy]: must be ExitCode"));
}

TEST_F(FinishedJobsTest, UncountedRestartsLeaveMaxRestartsAlone) {
  const std::string rules =
      "        rules:\n"
      "          - name: infra\n"
      "            action: RestartJobSetAndIgnoreMaxRestarts\n"
      "            onJobFailureMessagePatterns: [\"signal\"]\n";
  options_.restart_backoff = std::chrono::milliseconds(1);
  MakeController();
  std::string runtime = RulesRuntime("rules", rules);
  runtime.replace(runtime.find("maxRestarts: 3"), 14, "maxRestarts: 0");
  ApplyOk(runtime + "---\n" + JobYaml("j", 1, 1, "rules"));
  int64_t t = kT0;
  for (uint32_t attempt = 1; attempt <= 3; ++attempt) {
    ASSERT_EQ(JobOrDie("j").attempt(), attempt);
    ReportAll("j", kStarted, t += 10);
    Report("j", 0, kExited, t += 10, 0, 9);
    ASSERT_EQ(PhaseName(JobOrDie("j")), "Restarting") << attempt;
    controller_->Schedule(t += 1000);
  }
  ReportAll("j", kStarted, t += 10);
  Report("j", 0, kExited, t += 10, 1);  // no rule matches, maxRestarts 0: fails
  EXPECT_EQ(PhaseName(JobOrDie("j")), "Failed");
  EXPECT_EQ(JobOrDie("j").reason(), "BackoffLimitExceeded");
}

TEST_F(FinishedJobsTest, TtlDeletesTheFinishedJobAndPurgesItsNodes) {
  ApplyOk(RulesRuntime("ttl", "      ttlSecondsAfterFinished: 2\n") + "---\n" +
          JobYaml("j", 2, 1, "ttl"));
  ReportAll("j", kStarted, kT0 + 10);
  ReportAll("j", kExited, kT0 + 1000);
  const v1::JobStatus& st = JobOrDie("j");
  ASSERT_EQ(PhaseName(st), "Succeeded");
  EXPECT_EQ(st.finished_unix_ms(), kT0 + 1000);
  EXPECT_EQ(st.ttl_delete_unix_ms(), kT0 + 3000);
  EXPECT_EQ(controller_->NextWakeMs(), kT0 + 3000);
  ASSERT_TRUE(controller_->Flush().ok());
  // A coordinator restart keeps the time: it was stored with the finish.
  MakeController();
  controller_->Schedule(kT0 + 2999);
  ASSERT_NE(controller_->Find("j"), nullptr);
  EXPECT_TRUE(PurgedNodes("j").empty());
  controller_->Schedule(kT0 + 3000);
  EXPECT_EQ(controller_->Find("j"), nullptr);
  EXPECT_FALSE(Stored("j").has_value());
  EXPECT_THAT(PurgedNodes("j"), ElementsAre("n1", "n2"));
}

TEST_F(FinishedJobsTest, DefaultTtlFromTheConfigAndTheRuntimeWins) {
  options_.finished_job_ttl = std::chrono::seconds(60);
  MakeController();
  ApplyOk(JobYaml("default", 1, 1) + "---\n" +
          RulesRuntime("ttl", "      ttlSecondsAfterFinished: 0\n") + "---\n" +
          JobYaml("zero", 1, 1, "ttl"));
  ReportAll("default", kStarted, kT0 + 10);
  ReportAll("default", kExited, kT0 + 20, 2);
  ReportAll("zero", kStarted, kT0 + 10);
  ReportAll("zero", kExited, kT0 + 20);
  EXPECT_EQ(JobOrDie("default").ttl_delete_unix_ms(), kT0 + 60020);  // Failed counts too
  EXPECT_EQ(JobOrDie("zero").ttl_delete_unix_ms(), kT0 + 20);
  controller_->Schedule(kT0 + 20);
  EXPECT_EQ(controller_->Find("zero"), nullptr);
  EXPECT_NE(controller_->Find("default"), nullptr);
}

TEST_F(FinishedJobsTest, DeletePurgesEveryNodeOfEveryAttempt) {
  options_.restart_backoff = std::chrono::milliseconds(1);
  MakeController();
  ApplyOk(RuntimeYaml("retry", "", 1) + "---\n" + JobYaml("j", 1, 1, "retry"));
  const std::string first = JobOrDie("j").ranks(0).node();
  ReportAll("j", kStarted, kT0 + 10);
  Report("j", 0, kExited, kT0 + 20, 1);
  controller_->Schedule(kT0 + 5000);
  ReportAll("j", kStarted, kT0 + 5010);
  const std::string second = JobOrDie("j").ranks(0).node();
  ASSERT_TRUE(controller_->Delete("j", kT0 + 6000).ok());
  EXPECT_TRUE(PurgedNodes("j").empty());  // its rank still runs
  ReportAll("j", kExited, kT0 + 6100, 0, 15);
  EXPECT_EQ(controller_->Find("j"), nullptr);
  std::vector<std::string> expected = {first, second};
  std::sort(expected.begin(), expected.end());
  expected.erase(std::unique(expected.begin(), expected.end()), expected.end());
  EXPECT_EQ(PurgedNodes("j"), expected);
}

}  // namespace
}  // namespace trainlet::coordinator::testing
