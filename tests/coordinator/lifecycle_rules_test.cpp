// The pure lifecycle rules: restart limit and backoff, deadlines, ended ranks, suspend edits,
// and preemption's (the stop warning, the restart env).
#include "coordinator/lifecycle_rules.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <yaml-cpp/yaml.h>

#include <climits>
#include <map>
#include <string>

#include "coordinator/job_state_machine.h"
#include "coordinator/rank_state_machine.h"

namespace trainlet::coordinator {
namespace {

using std::chrono::milliseconds;

const char* kJobYaml =
    "apiVersion: trainer.kubeflow.org/v1alpha1\n"
    "kind: TrainJob\n"
    "metadata:\n"
    "  name: j\n"
    "spec:\n"
    "  runtimeRef:\n"
    "    name: plain\n"
    "  trainer:\n"
    "    numNodes: 1\n"
    "    command: [\"/bin/true\"]\n";

trainjob::TrainJob ParseJob(const std::string& yaml) {
  auto parsed = trainjob::ParseDocuments(yaml);
  EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->jobs.size(), 1u);
  return parsed->jobs.at(0);
}

v1::JobStatus Status(JobPhase phase) {
  v1::JobStatus st;
  st.set_name("j");
  st.set_job_phase(static_cast<v1::JobPhase>(phase));
  return st;
}

TEST(RestartLimit, AnnotationOverridesTheRuntime) {
  trainjob::TrainJob job;
  job.name = "j";
  trainjob::TrainingRuntime runtime;
  runtime.max_restarts = 3;
  EXPECT_EQ(*RestartLimit(job, runtime), 3u);
  runtime.max_restarts = -1;
  EXPECT_EQ(*RestartLimit(job, runtime), 0u);
  job.annotations[std::string(kMaxRestartsAnnotation)] = "7";
  EXPECT_EQ(*RestartLimit(job, runtime), 7u);
  for (const char* bad : {"", "-1", "1001", "1e3", "abc", "99999"}) {
    job.annotations[std::string(kMaxRestartsAnnotation)] = bad;
    auto r = RestartLimit(job, runtime);
    EXPECT_EQ(r.status().code(), ErrorCode::kInvalid) << bad;
  }
}

// A silent node may run its ranks for the partition grace, then give them the stop grace: a
// restart before both have passed would overlap them (issue 19, defect 2: the hold used to leave
// the stop grace out, and a SIGSTOPped agent's ranks ran 10 s beside the new attempt).
TEST(RestartHold, CoversPartitionGraceStopGraceAndAMargin) {
  EXPECT_EQ(RestartHoldMs(100000, milliseconds(10000), 10000),
            100000 + 10000 + 10000 + kRestartHoldMarginMs);
  EXPECT_EQ(RestartHoldMs(0, milliseconds(2000), 0), 2000 + kRestartHoldMarginMs);
  EXPECT_GE(kRestartHoldMarginMs, 1000);  // the step's check interval, a beat, and slack
}

TEST(RestartBackoff, DoublesUpToTheMaximum) {
  EXPECT_EQ(RestartBackoff(0, milliseconds(250), milliseconds(60000)), milliseconds(250));
  EXPECT_EQ(RestartBackoff(1, milliseconds(250), milliseconds(60000)), milliseconds(500));
  EXPECT_EQ(RestartBackoff(3, milliseconds(250), milliseconds(60000)), milliseconds(2000));
  EXPECT_EQ(RestartBackoff(10, milliseconds(250), milliseconds(60000)), milliseconds(60000));
  EXPECT_EQ(RestartBackoff(1000, milliseconds(250), milliseconds(60000)), milliseconds(60000));
}

TEST(RankEnded, OnlyFinalStates) {
  v1::RankStatus r;
  for (const char* s : {"Succeeded", "Failed", "StartFailed", "Lost", "Stopped"}) {
    r.set_rank_state(*ParseRankState(s));
    EXPECT_TRUE(RankEnded(r)) << s;
  }
  for (const char* s : {"Pending", "Running"}) {
    r.set_rank_state(*ParseRankState(s));
    EXPECT_FALSE(RankEnded(r)) << s;
  }
}

TEST(ActiveDeadlineMs, CountsFromCreationAndNeverOverflows) {
  trainjob::TrainJob spec;
  EXPECT_EQ(ActiveDeadlineMs(spec, 1000), INT64_MAX);
  spec.active_deadline_seconds = 5;
  EXPECT_EQ(ActiveDeadlineMs(spec, 1000), 6000);
  spec.active_deadline_seconds = -5;
  EXPECT_EQ(ActiveDeadlineMs(spec, 1000), 1000);
  spec.active_deadline_seconds = INT64_MAX;
  EXPECT_EQ(ActiveDeadlineMs(spec, 1000), INT64_MAX);
}

TEST(StartDeadlineMs, OnlyWhileStartingWithARankPending) {
  v1::JobStatus st = Status(JobPhase::kStarting);
  EXPECT_EQ(StartDeadlineMs(st, milliseconds(100)), INT64_MAX);  // no attempt yet
  st.add_attempts()->set_started_unix_ms(5000);
  st.add_ranks()->set_rank_state(*ParseRankState("Running"));
  st.add_ranks()->set_rank_state(*ParseRankState("Pending"));
  EXPECT_EQ(StartDeadlineMs(st, milliseconds(100)), 5100);
  st.mutable_ranks(1)->set_rank_state(*ParseRankState("Running"));
  EXPECT_EQ(StartDeadlineMs(st, milliseconds(100)), INT64_MAX);
  st.mutable_ranks(1)->set_rank_state(*ParseRankState("Pending"));
  st.set_job_phase(v1::JOB_PHASE_RUNNING);
  EXPECT_EQ(StartDeadlineMs(st, milliseconds(100)), INT64_MAX);
  st.set_job_phase(v1::JOB_PHASE_STARTING);
  st.set_deleting(true);
  EXPECT_EQ(StartDeadlineMs(st, milliseconds(100)), INT64_MAX);
}

TEST(EndAttemptRecord, ClosesOnlyAnOpenRecord) {
  v1::JobStatus st;
  EndAttemptRecord(st, AttemptTrigger::kFailed, "x", 1);  // no record: nothing to do
  st.add_attempts();
  EndAttemptRecord(st, AttemptTrigger::kStopped, "suspended", 7);
  EXPECT_EQ(AttemptResultName(st.attempts(0).attempt_result()), "Stopped");
  EXPECT_EQ(st.attempts(0).cause(), "suspended");
  EXPECT_EQ(st.attempts(0).ended_unix_ms(), 7);
  EndAttemptRecord(st, AttemptTrigger::kFailed, "later", 9);
  EXPECT_EQ(AttemptResultName(st.attempts(0).attempt_result()), "Stopped");
}

TEST(PrepareSuspend, StopsTheAttemptWithoutUsingARestart) {
  v1::JobStatus st = Status(JobPhase::kRunning);
  st.add_attempts();
  auto flip = PrepareSuspend(st, true, "yaml", "trainletctl suspend", 42);
  ASSERT_TRUE(flip.ok()) << flip.status().ToString();
  EXPECT_EQ(flip->job, "j");
  EXPECT_TRUE(flip->suspend);
  EXPECT_EQ(flip->spec_yaml, "yaml");
  EXPECT_EQ(JobPhaseName(PhaseOf(flip->status)), "Suspended");
  EXPECT_EQ(AttemptResultName(flip->status.attempts(0).attempt_result()), "Stopped");
  EXPECT_EQ(JobPhaseName(PhaseOf(st)), "Running");  // the input is untouched

  auto resume = PrepareSuspend(flip->status, false, "yaml", "trainletctl resume", 43);
  ASSERT_TRUE(resume.ok());
  EXPECT_EQ(JobPhaseName(PhaseOf(resume->status)), "Pending");
}

TEST(PrepareSuspend, RefusesFinishedAndDeletingJobs) {
  EXPECT_EQ(PrepareSuspend(Status(JobPhase::kSucceeded), true, "", "x", 1).status().code(),
            ErrorCode::kInvalid);
  v1::JobStatus deleting = Status(JobPhase::kRunning);
  deleting.set_deleting(true);
  EXPECT_EQ(PrepareSuspend(deleting, true, "", "x", 1).status().code(), ErrorCode::kInvalid);
}

TEST(CompareWithStored, OnlySuspendMayChange) {
  JobRecord stored;
  stored.name = "j";
  stored.spec_yaml = ParseJob(kJobYaml).yaml;
  stored.status = Status(JobPhase::kPending);

  auto same = CompareWithStored(stored, false, ParseJob(kJobYaml), "f.yaml", 1);
  ASSERT_TRUE(same.ok());
  EXPECT_FALSE(same->has_value());

  auto suspend_yaml = WithSuspend(kJobYaml, true);
  ASSERT_TRUE(suspend_yaml.ok());
  auto flip = CompareWithStored(stored, false, ParseJob(*suspend_yaml), "f.yaml", 1);
  ASSERT_TRUE(flip.ok()) << flip.status().ToString();
  ASSERT_TRUE(flip->has_value());
  EXPECT_EQ((*flip)->job, "j");
  EXPECT_TRUE((*flip)->suspend);
  EXPECT_EQ(JobPhaseName(PhaseOf((*flip)->status)), "Suspended");

  // suspend: false written out where it was absent is no change.
  auto not_suspended = WithSuspend(kJobYaml, false);
  ASSERT_TRUE(not_suspended.ok());
  auto unchanged = CompareWithStored(stored, false, ParseJob(*not_suspended), "f.yaml", 1);
  ASSERT_TRUE(unchanged.ok());
  EXPECT_FALSE(unchanged->has_value());

  std::string other = kJobYaml;
  other.replace(other.find("/bin/true"), 9, "/bin/false");
  auto changed = CompareWithStored(stored, false, ParseJob(other), "f.yaml", 1);
  EXPECT_EQ(changed.status().code(), ErrorCode::kExists);
}

// A suspend rewrites the stored document: a string that reads as another type unquoted stays a
// string ("true", "1", "null", "0o17", "yes"). yaml-cpp's own emitter wrote `- true`, and the
// coordinator's next start left the suspended job unloaded ("no longer parses").
TEST(LifecycleRules, ASuspendKeepsEveryScalarsType) {
  const std::string yaml =
      "apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata: {name: q}\n"
      "spec:\n  runtimeRef: {name: torch-distributed}\n  trainer:\n"
      "    command: [\"true\"]\n    args: [\"1\", \"null\", \"0o17\", \"yes\", \"~\"]\n"
      "    env:\n    - {name: N, value: \"8\"}\n";
  const trainjob::TrainJob before = ParseJob(yaml);
  for (const bool suspend : {true, false}) {
    auto rewritten = WithSuspend(before.yaml, suspend);
    ASSERT_TRUE(rewritten.ok()) << rewritten.status().ToString();
    auto parsed = trainjob::ParseDocuments(*rewritten);
    ASSERT_TRUE(parsed.ok()) << parsed.status().ToString() << "\n" << *rewritten;
    ASSERT_EQ(parsed->jobs.size(), 1u);
    const trainjob::TrainJob& after = parsed->jobs[0];
    EXPECT_EQ(after.suspend, suspend);
    EXPECT_EQ(after.trainer.command, std::vector<std::string>{"true"});
    EXPECT_EQ(after.trainer.args, (std::vector<std::string>{"1", "null", "0o17", "yes", "~"}));
    // And it is still the job applied, but for suspend: applying that again changes nothing.
    JobRecord stored;
    stored.name = "q";
    stored.spec_yaml = *rewritten;
    stored.status = Status(JobPhase::kPending);
    auto same = CompareWithStored(stored, false, before, "f.yaml", 1);
    ASSERT_TRUE(same.ok()) << same.status().ToString();
    EXPECT_FALSE(same->has_value());
  }
  // A spec a suspend rewrote before it kept types (`- true`, `cpu: 1`) still matches the file it
  // came from: re-applying that file changes nothing.
  YAML::Node doc = YAML::Load(before.yaml);
  doc["spec"]["suspend"] = true;
  YAML::Emitter plain;  // the old WithSuspend
  plain << doc;
  JobRecord old_rewrite;
  old_rewrite.name = "q";
  old_rewrite.spec_yaml = std::string(plain.c_str()) + "\n";
  ASSERT_NE(old_rewrite.spec_yaml.find("- true"), std::string::npos) << old_rewrite.spec_yaml;
  old_rewrite.status = Status(JobPhase::kPending);
  auto matched = CompareWithStored(old_rewrite, false, before, "f.yaml", 1);
  ASSERT_TRUE(matched.ok()) << matched.status().ToString();
  EXPECT_FALSE(matched->has_value());
}

}  // namespace
}  // namespace trainlet::coordinator

namespace trainlet::coordinator {
namespace {

trainjob::TrainJob JobWith(const std::map<std::string, std::string>& annotations) {
  trainjob::TrainJob job;
  job.name = "j";
  job.annotations = annotations;
  return job;
}

TEST(StopWarningOf, DefaultsAnnotationsAndRefusals) {
  auto plain = StopWarningOf(JobWith({}), milliseconds(30000));
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->signal, SIGUSR1);
  EXPECT_EQ(plain->grace_ms, 30000u);
  for (const char* text : {"SIGUSR2", "USR2", "usr2", "12"}) {
    auto w = StopWarningOf(JobWith({{"trainlet.io/preemption-signal", text}}), milliseconds(0));
    ASSERT_TRUE(w.ok()) << text;
    EXPECT_EQ(w->signal, SIGUSR2) << text;
  }
  auto grace =
      StopWarningOf(JobWith({{"trainlet.io/preemption-grace-seconds", "0"}}), milliseconds(30000));
  ASSERT_TRUE(grace.ok());
  EXPECT_EQ(grace->grace_ms, 0u);
  for (const char* text : {"SIGKILL", "9", "STOP", "", "USR3", "SIGSIGUSR1"}) {
    auto w = StopWarningOf(JobWith({{"trainlet.io/preemption-signal", text}}), milliseconds(0));
    ASSERT_FALSE(w.ok()) << text;
    EXPECT_NE(w.status().message().find("trainlet.io/preemption-signal"), std::string::npos);
  }
  for (const char* text : {"-1", "86401", "1.5", "", "30s"}) {
    auto w =
        StopWarningOf(JobWith({{"trainlet.io/preemption-grace-seconds", text}}), milliseconds(0));
    ASSERT_FALSE(w.ok()) << text;
    EXPECT_NE(w.status().message().find("trainlet.io/preemption-grace-seconds"), std::string::npos);
  }
  EXPECT_EQ(SignalName(SIGUSR1), "SIGUSR1");
  EXPECT_EQ(WarningMessage({SIGUSR2, 1500}, "why"),
            "SIGUSR2 sent to every rank; SIGTERM in 1500 ms (why)");
}

TEST(DeadlineWarningMs, WhenWantedWhileAnAttemptRunsOnce) {
  trainjob::TrainJob spec = JobWith({});
  spec.active_deadline_seconds = 60;
  v1::JobStatus st = Status(JobPhase::kRunning);
  st.set_created_unix_ms(1000);
  st.set_attempt(2);
  const StopWarning w{SIGUSR1, 10000};
  EXPECT_EQ(DeadlineWarningMs(spec, st, w, true), 1000 + 50000);
  EXPECT_EQ(DeadlineWarningMs(spec, st, w, false), INT64_MAX);  // not wanted
  EXPECT_EQ(DeadlineWarningMs(spec, st, StopWarning{0, 10000}, true), INT64_MAX);
  // A grace longer than half the deadline is cut to half.
  EXPECT_EQ(DeadlineWarningMs(spec, st, StopWarning{SIGUSR1, 45000}, true), 1000 + 30000);
  EXPECT_EQ(DeadlineWarningMs(spec, Status(JobPhase::kSuspended), w, true), INT64_MAX);
  st.set_deadline_warned_attempt(1);  // an attempt before: this one is still to warn
  EXPECT_FALSE(DeadlineWarned(st));
  EXPECT_EQ(DeadlineWarningMs(spec, st, w, true), 1000 + 50000);
  st.set_deadline_warned_attempt(2);
  EXPECT_TRUE(DeadlineWarned(st));
  EXPECT_EQ(DeadlineWarningMs(spec, st, w, true), INT64_MAX);
  spec.active_deadline_seconds.reset();
  EXPECT_EQ(DeadlineWarningMs(spec, Status(JobPhase::kRunning), w, true), INT64_MAX);
}

TEST(DeadlineWarningWanted, TheAnnotationElseAskingElseTheCoordinatorsDefault) {
  EXPECT_TRUE(DeadlineWarningWanted(JobWith({}), true));
  EXPECT_FALSE(DeadlineWarningWanted(JobWith({}), false));
  EXPECT_FALSE(DeadlineWarningWanted(JobWith({{"trainlet.io/deadline-warning", "false"}}), true));
  EXPECT_TRUE(DeadlineWarningWanted(JobWith({{"trainlet.io/deadline-warning", "true"}}), false));
  EXPECT_TRUE(DeadlineWarningWanted(JobWith({{"trainlet.io/preemption-signal", "USR2"}}), false));
  EXPECT_TRUE(
      DeadlineWarningWanted(JobWith({{"trainlet.io/preemption-grace-seconds", "5"}}), false));
  EXPECT_FALSE(DeadlineWarningWanted(JobWith({{"trainlet.io/preemption-grace-seconds", "5"},
                                              {"trainlet.io/deadline-warning", "false"}}),
                                     true));
  // Anything but true or false is refused at apply, naming the annotation.
  for (const char* bad : {"yes", "True", "", "1"}) {
    auto w =
        StopWarningOf(JobWith({{"trainlet.io/deadline-warning", bad}}), std::chrono::seconds(30));
    ASSERT_FALSE(w.ok()) << bad;
    EXPECT_NE(w.status().message().find("metadata.annotations[trainlet.io/deadline-warning]: "
                                        "must be \"true\" or \"false\""),
              std::string::npos)
        << w.status().message();
  }
}

TEST(RestartEnv, SaysWhyTheAttemptBeforeEnded) {
  v1::JobStatus st = Status(JobPhase::kPending);
  EXPECT_TRUE(RestartEnv(st).empty());
  auto* rec = st.add_attempts();
  rec->set_attempt_result(v1::ATTEMPT_RESULT_FAILED);
  using Env = std::vector<std::pair<std::string, std::string>>;
  EXPECT_EQ(RestartEnv(st), (Env{{"TRAINLET_RESTART_REASON", "failed"}}));
  rec->set_attempt_result(v1::ATTEMPT_RESULT_STOPPED);
  EXPECT_EQ(RestartEnv(st), (Env{{"TRAINLET_RESTART_REASON", "suspended"}}));
  st.set_preempted(true);
  EXPECT_EQ(RestartEnv(st),
            (Env{{"TRAINLET_PREEMPTED", "1"}, {"TRAINLET_RESTART_REASON", "preempted"}}));
}

TEST(PreparePreemption, SuspendsWithKueuesReasonAndCounts) {
  v1::JobStatus st = Status(JobPhase::kRunning);
  st.add_attempts()->set_attempt(1);
  st.add_ranks()->set_rank_state(v1::RANK_STATE_RUNNING);
  auto flip = PreparePreemption(st, "spec", "team-a/llm-7 (priority 1000)", {SIGUSR1, 30000}, 5);
  ASSERT_TRUE(flip.ok()) << flip.status().ToString();
  EXPECT_TRUE(flip->suspend);
  EXPECT_EQ(PhaseOf(flip->status), JobPhase::kSuspended);
  EXPECT_EQ(flip->status.reason(), "Preempted");
  EXPECT_EQ(flip->status.preemptions(), 1u);
  EXPECT_TRUE(flip->status.preempted());
  EXPECT_EQ(flip->status.attempts(0).attempt_result(), v1::ATTEMPT_RESULT_STOPPED);
  EXPECT_EQ(flip->warning.signal, SIGUSR1);
  ASSERT_GE(flip->status.events_size(), 2);
  EXPECT_EQ(flip->status.events(flip->status.events_size() - 1).reason(), "PreemptionWarning");
  EXPECT_FALSE(PreparePreemption(flip->status, "spec", "x", {}, 6).ok());  // suspended already
  EXPECT_FALSE(PreparePreemption(Status(JobPhase::kSucceeded), "spec", "x", {}, 6).ok());
}

TEST(LifecycleRulesTest, TtlDeleteTimeFromTheRuntimeElseTheDefault) {
  trainjob::TrainingRuntime rt;
  EXPECT_EQ(TtlDeleteMs(rt, std::nullopt, 5000), 0);  // kept
  EXPECT_EQ(TtlDeleteMs(rt, std::chrono::seconds(60), 5000), 65000);
  rt.ttl_seconds_after_finished = 2;
  EXPECT_EQ(TtlDeleteMs(rt, std::chrono::seconds(60), 5000), 7000);
  rt.ttl_seconds_after_finished = 0;
  EXPECT_EQ(TtlDeleteMs(rt, std::chrono::seconds(60), 5000), 5000);
  rt.ttl_seconds_after_finished = INT32_MAX;
  EXPECT_EQ(TtlDeleteMs(rt, std::nullopt, INT64_MAX - 10), 0);  // too far to count: kept
}

TEST(LifecycleRulesTest, NodesThatRanEveryAttempt) {
  v1::JobStatus st;
  auto* a1 = st.add_attempts();
  a1->add_rank_nodes("n2");
  a1->add_rank_nodes("n1");
  auto* a2 = st.add_attempts();
  a2->add_rank_nodes("n3");
  a2->add_rank_nodes("n3");
  st.add_ranks()->set_node("n3");
  st.add_ranks()->set_node("");
  EXPECT_EQ(NodesThatRan(st), (std::vector<std::string>{"n1", "n2", "n3"}));
  EXPECT_TRUE(NodesThatRan(v1::JobStatus()).empty());
}

}  // namespace
}  // namespace trainlet::coordinator
