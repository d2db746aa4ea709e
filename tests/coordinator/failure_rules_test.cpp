// The failure rules' decision (coordinator/failure_rules.h): JobSet's actions, reasons, targets
// and message patterns, the ExitCode restart policy, and the restarts an attempt record counts.
#include "coordinator/failure_rules.h"

#include <gtest/gtest.h>

namespace trainlet::coordinator {
namespace {

using Action = FailureDecision::Action;
using trainjob::FailureRule;

FailureRule Rule(std::string name, std::string action, std::vector<std::string> reasons = {},
                 std::vector<std::string> targets = {}, std::vector<std::string> patterns = {}) {
  FailureRule r;
  r.name = std::move(name);
  r.action = std::move(action);
  r.on_job_failure_reasons = std::move(reasons);
  r.target_replicated_jobs = std::move(targets);
  r.on_job_failure_message_patterns = std::move(patterns);
  return r;
}

AttemptFailure Exited(int code, std::string replicated_job = "node") {
  AttemptFailure f;
  f.kind = AttemptFailure::Kind::kExited;
  f.exit_code = code;
  f.replicated_job = std::move(replicated_job);
  f.message = "rank 1 on node-b exited with code " + std::to_string(code);
  return f;
}

AttemptFailure Signaled(int signal) {
  AttemptFailure f;
  f.kind = AttemptFailure::Kind::kSignaled;
  f.signal = signal;
  f.replicated_job = "node";
  f.message = "rank 1 on node-b was killed by signal " + std::to_string(signal);
  return f;
}

TEST(FailureRulesTest, NoRuleRestartsWhileMaxRestartsAllows) {
  const FailureDecision d = DecideFailure({}, RestartPolicy::kOnFailure, Exited(1), 0, 3);
  EXPECT_EQ(d.action, Action::kRestart);
  EXPECT_EQ(d.rule, "");
  EXPECT_EQ(d.reason, "BackoffLimitExceeded");
  const FailureDecision last = DecideFailure({}, RestartPolicy::kOnFailure, Exited(1), 3, 3);
  EXPECT_EQ(last.action, Action::kFail);
  EXPECT_TRUE(last.limit_reached);
  EXPECT_EQ(last.rule, "");
}

TEST(FailureRulesTest, FailJobSetFailsAtOnceWhateverTheRestartsLeft) {
  const std::vector<FailureRule> rules = {
      Rule("failOnUserError", "FailJobSet", {"BackoffLimitExceeded"})};
  const FailureDecision d = DecideFailure(rules, RestartPolicy::kOnFailure, Exited(1), 0, 3);
  EXPECT_EQ(d.action, Action::kFail);
  EXPECT_FALSE(d.limit_reached);
  EXPECT_EQ(d.rule, "failOnUserError (FailJobSet)");
}

TEST(FailureRulesTest, RestartJobSetCountsAndStopsAtTheLimit) {
  const std::vector<FailureRule> rules = {Rule("again", "RestartJobSet")};
  EXPECT_EQ(DecideFailure(rules, RestartPolicy::kOnFailure, Exited(1), 1, 2).action,
            Action::kRestart);
  const FailureDecision d = DecideFailure(rules, RestartPolicy::kOnFailure, Exited(1), 2, 2);
  EXPECT_EQ(d.action, Action::kFail);
  EXPECT_TRUE(d.limit_reached);
  EXPECT_EQ(d.rule, "again (RestartJobSet)");
}

TEST(FailureRulesTest, IgnoreMaxRestartsRestartsPastTheLimit) {
  const std::vector<FailureRule> rules = {Rule("always", "RestartJobSetAndIgnoreMaxRestarts")};
  const FailureDecision d = DecideFailure(rules, RestartPolicy::kOnFailure, Signaled(9), 5, 0);
  EXPECT_EQ(d.action, Action::kRestartNotCounted);
  EXPECT_EQ(d.rule, "always (RestartJobSetAndIgnoreMaxRestarts)");
}

TEST(FailureRulesTest, FirstMatchingRuleWins) {
  const std::vector<FailureRule> rules = {
      Rule("deadline", "RestartJobSetAndIgnoreMaxRestarts", {"DeadlineExceeded"}),
      Rule("fail", "FailJobSet", {"BackoffLimitExceeded", "PodFailurePolicy"}),
      Rule("restart", "RestartJobSet")};
  const FailureDecision d = DecideFailure(rules, RestartPolicy::kOnFailure, Exited(2), 0, 3);
  EXPECT_EQ(d.rule, "fail (FailJobSet)");
  EXPECT_EQ(d.action, Action::kFail);
}

TEST(FailureRulesTest, ReasonThatTrainletNeverSeesDoesNotMatch) {
  const std::vector<FailureRule> rules = {Rule("deadline", "FailJobSet", {"DeadlineExceeded"})};
  const FailureDecision d = DecideFailure(rules, RestartPolicy::kOnFailure, Exited(1), 0, 1);
  EXPECT_EQ(d.action, Action::kRestart);
  EXPECT_EQ(d.rule, "");
}

TEST(FailureRulesTest, TargetsMatchTheFailedWorkersReplicatedJob) {
  const std::vector<FailureRule> rules = {
      Rule("init-fails", "FailJobSet", {}, {"dataset-initializer", "model-initializer"})};
  EXPECT_EQ(DecideFailure(rules, RestartPolicy::kOnFailure, Exited(1, "node"), 0, 3).action,
            Action::kRestart);
  const FailureDecision d =
      DecideFailure(rules, RestartPolicy::kOnFailure, Exited(1, "dataset-initializer"), 0, 3);
  EXPECT_EQ(d.action, Action::kFail);
  EXPECT_EQ(d.rule, "init-fails (FailJobSet)");
  // A failure of no one worker (a lost node) matches no targeted rule.
  AttemptFailure lost;
  lost.message = "node n2 lost";
  EXPECT_EQ(DecideFailure(rules, RestartPolicy::kOnFailure, lost, 0, 3).action, Action::kRestart);
  EXPECT_EQ(
      DecideFailure({Rule("any", "FailJobSet")}, RestartPolicy::kOnFailure, lost, 0, 3).action,
      Action::kFail);
}

// Issue 18: a failure of no one worker (a lost or drained node) is attributed to the replicated
// jobs whose workers it took down, as JobSet attributes a node's loss to the Jobs of its pods.
// Today's main matched it against no targeted rule at all.
// Issue 18: a start timeout or a port error names the replicated jobs of the workers it hit, on
// every node, so that a targeted rule fires for them as for a failed Job of that replicated job.
TEST(FailureRulesTest, AFailureOfRanksOnAnyNodeMatchesTheirReplicatedJobs) {
  v1::JobStatus st;
  auto add = [&](const std::string& node, const std::string& step, v1::RankState state) {
    auto* r = st.add_ranks();
    r->set_node(node);
    r->set_step(step);
    r->set_rank_state(state);
  };
  add("n1", "", v1::RANK_STATE_PENDING);
  add("n2", "", v1::RANK_STATE_PENDING);
  add("n1", "dataset-initializer", v1::RANK_STATE_RUNNING);
  add("n2", "dataset-initializer", v1::RANK_STATE_RUNNING);
  const auto pending = [](const v1::RankStatus& r) {
    return r.rank_state() == v1::RANK_STATE_PENDING;
  };
  const AttemptFailure timeout = FailureOfRanks(st, pending, "StartTimeout: ranks not started");
  EXPECT_EQ(timeout.kind, AttemptFailure::Kind::kOther);
  EXPECT_EQ(timeout.replicated_jobs, (std::vector<std::string>{"node"}));
  const std::vector<FailureRule> on_node = {
      Rule("nodeStuck", "FailJobSet", {"BackoffLimitExceeded"}, {"node"})};
  const FailureDecision d = DecideFailure(on_node, RestartPolicy::kOnFailure, timeout, 0, 3);
  EXPECT_EQ(d.action, Action::kFail);
  EXPECT_EQ(d.rule, "nodeStuck (FailJobSet)");
  const std::vector<FailureRule> on_init = {
      Rule("initStuck", "FailJobSet", {}, {"dataset-initializer"})};
  EXPECT_EQ(DecideFailure(on_init, RestartPolicy::kOnFailure, timeout, 0, 3).action,
            Action::kRestart);
  // Nothing hit: only rules without targets match.
  const AttemptFailure none = FailureOfRanks(
      st, [](const v1::RankStatus&) { return false; }, "stalled");
  EXPECT_TRUE(none.replicated_jobs.empty());
  EXPECT_EQ(DecideFailure(on_node, RestartPolicy::kOnFailure, none, 0, 3).action, Action::kRestart);
}

TEST(FailureRulesTest, ALostNodeMatchesTheReplicatedJobsItTookDown) {
  v1::JobStatus st;
  auto add = [&](const std::string& node, const std::string& step, v1::RankState state) {
    auto* r = st.add_ranks();
    r->set_node(node);
    r->set_step(step);
    r->set_rank_state(state);
  };
  add("n1", "", v1::RANK_STATE_RUNNING);
  add("n2", "", v1::RANK_STATE_LOST);
  add("n2", "dataset-initializer", v1::RANK_STATE_SUCCEEDED);  // ended before: not taken down
  add("n2", "watcher", v1::RANK_STATE_LOST);
  const AttemptFailure lost = FailureOnNode(
      st, "n2", [](const v1::RankStatus& r) { return r.rank_state() == v1::RANK_STATE_LOST; },
      "node n2 lost");
  EXPECT_EQ(lost.kind, AttemptFailure::Kind::kOther);
  EXPECT_EQ(lost.replicated_jobs, (std::vector<std::string>{"node", "watcher"}));
  EXPECT_EQ(lost.message, "node n2 lost");

  const std::vector<FailureRule> on_node = {Rule("node-lost", "FailJobSet", {}, {"node"})};
  const FailureDecision d = DecideFailure(on_node, RestartPolicy::kOnFailure, lost, 0, 3);
  EXPECT_EQ(d.action, Action::kFail);
  EXPECT_EQ(d.rule, "node-lost (FailJobSet)");
  const std::vector<FailureRule> on_init = {
      Rule("init-fails", "FailJobSet", {}, {"dataset-initializer"})};
  EXPECT_EQ(DecideFailure(on_init, RestartPolicy::kOnFailure, lost, 0, 3).action, Action::kRestart);
}

TEST(FailureRulesTest, MessagePatternsMatchTheJobMessageOrTrainletsCause) {
  const std::vector<FailureRule> by_job_message = {
      Rule("backoff", "FailJobSet", {}, {}, {"reached the specified backoff limit"})};
  EXPECT_EQ(DecideFailure(by_job_message, RestartPolicy::kOnFailure, Exited(1), 0, 3).action,
            Action::kFail);
  const std::vector<FailureRule> by_code = {
      Rule("code-42", "FailJobSet", {}, {}, {"exited with code 4[2]$"})};
  EXPECT_EQ(DecideFailure(by_code, RestartPolicy::kOnFailure, Exited(42), 0, 3).action,
            Action::kFail);
  EXPECT_EQ(DecideFailure(by_code, RestartPolicy::kOnFailure, Exited(43), 0, 3).action,
            Action::kRestart);
}

TEST(FailureRulesTest, ExitCodePolicyFailsOnPermanentCodesOnly) {
  for (int code : {1, 3, 127}) {
    const FailureDecision d = DecideFailure({}, RestartPolicy::kExitCode, Exited(code), 0, 3);
    EXPECT_EQ(d.action, Action::kFail) << code;
    EXPECT_EQ(d.rule, "ExitCode (permanent exit code " + std::to_string(code) + ")");
  }
  for (int code : {128, 137, 143, 255}) {
    EXPECT_EQ(DecideFailure({}, RestartPolicy::kExitCode, Exited(code), 0, 3).action,
              Action::kRestart)
        << code;
  }
  EXPECT_EQ(DecideFailure({}, RestartPolicy::kExitCode, Signaled(9), 0, 3).action,
            Action::kRestart);
  // Retried codes still count against maxRestarts.
  EXPECT_EQ(DecideFailure({}, RestartPolicy::kExitCode, Signaled(9), 3, 3).action, Action::kFail);
  // Without the policy, exit code 1 is retried.
  EXPECT_EQ(DecideFailure({}, RestartPolicy::kOnFailure, Exited(1), 0, 3).action, Action::kRestart);
}

TEST(FailureRulesTest, ExitCodePolicyComesBeforeTheRules) {
  const std::vector<FailureRule> rules = {Rule("always", "RestartJobSetAndIgnoreMaxRestarts")};
  EXPECT_EQ(DecideFailure(rules, RestartPolicy::kExitCode, Exited(3), 0, 3).action, Action::kFail);
  EXPECT_EQ(DecideFailure(rules, RestartPolicy::kExitCode, Exited(137), 0, 3).action,
            Action::kRestartNotCounted);
}

TEST(FailureRulesTest, RestartPolicyAnnotation) {
  trainjob::TrainJob job;
  job.name = "j";
  EXPECT_EQ(*RestartPolicyOf(job), RestartPolicy::kOnFailure);
  job.annotations["trainlet.io/restart-policy"] = "ExitCode";
  EXPECT_EQ(*RestartPolicyOf(job), RestartPolicy::kExitCode);
  job.annotations["trainlet.io/restart-policy"] = "OnFailure";
  EXPECT_EQ(*RestartPolicyOf(job), RestartPolicy::kOnFailure);
  job.annotations["trainlet.io/restart-policy"] = "exitcode";
  const auto bad = RestartPolicyOf(job);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "TrainJob/j: metadata.annotations[trainlet.io/restart-policy]: must be ExitCode or "
            "OnFailure, got \"exitcode\"");
}

TEST(FailureRulesTest, FailureOfRankReadsTheRank) {
  v1::RankStatus r;
  r.set_rank_state(v1::RANK_STATE_FAILED);
  r.set_exit_code(3);
  AttemptFailure f = FailureOfRank(r, "cause");
  EXPECT_EQ(f.kind, AttemptFailure::Kind::kExited);
  EXPECT_EQ(f.exit_code, 3);
  EXPECT_EQ(f.replicated_job, "node");
  EXPECT_EQ(f.message, "cause");
  r.set_signal(9);
  r.set_step("dataset-initializer");
  f = FailureOfRank(r, "cause");
  EXPECT_EQ(f.kind, AttemptFailure::Kind::kSignaled);
  EXPECT_EQ(f.signal, 9);
  EXPECT_EQ(f.replicated_job, "dataset-initializer");
  r.set_rank_state(v1::RANK_STATE_START_FAILED);
  EXPECT_EQ(FailureOfRank(r, "").kind, AttemptFailure::Kind::kStartFailed);
}

TEST(FailureRulesTest, RestartsUsedLeavesOutUncountedRestartsAndTheCurrentAttempt) {
  v1::JobStatus st;
  auto add = [&](v1::AttemptResult result, std::string rule) {
    auto* a = st.add_attempts();
    a->set_attempt_result(result);
    a->set_failure_rule(std::move(rule));
  };
  add(v1::ATTEMPT_RESULT_FAILED, "");
  add(v1::ATTEMPT_RESULT_FAILED, "always (RestartJobSetAndIgnoreMaxRestarts)");
  add(v1::ATTEMPT_RESULT_STOPPED, "");
  add(v1::ATTEMPT_RESULT_FAILED, "again (RestartJobSet)");
  add(v1::ATTEMPT_RESULT_FAILED, "");  // the current one
  EXPECT_EQ(RestartsUsed(st), 2u);
}

}  // namespace
}  // namespace trainlet::coordinator
