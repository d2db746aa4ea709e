// Preemption's mechanics in JobController (issue 14): Preempt suspends and requeues a job (not
// failed, no restart used up), its ranks get the warning signal and grace first, the events say
// who preempted it, and the next attempt's ranks are told (TRAINLET_PREEMPTED=1). The same
// warning goes before drain --force and before its activeDeadlineSeconds (unless the job or the
// coordinator turns that one off), and an attempt that ends after it ends the job,
// DeadlineExceeded. Over the real SQLite store of controller_fixture.h; time is passed in.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <map>

#include "controller_fixture.h"
#include "coordinator/job_controller.h"
#include "coordinator/job_state_machine.h"

namespace trainlet::coordinator {
namespace {

using testing::ControllerFixture;
using ::testing::HasSubstr;
using testing::JobYaml;
using testing::RuntimeYaml;

constexpr auto kStarted = v1::WorkerEvent::KIND_STARTED;
constexpr auto kExited = v1::WorkerEvent::KIND_EXITED;
constexpr char kBy[] = "team-a/llm-7 (priority 1000)";

// The job with `annotations` ("key: value" lines) under metadata.
std::string WithAnnotations(std::string yaml, const std::vector<std::string>& annotations) {
  std::string block = "  annotations:\n";
  for (const auto& a : annotations) block += "    " + a + "\n";
  const std::string anchor = "metadata:\n";
  yaml.insert(yaml.find(anchor) + anchor.size(), block);
  return yaml;
}

std::string WithSpecLine(std::string yaml, const std::string& line) {
  yaml.insert(yaml.find("  trainer:"), line);
  return yaml;
}

class PreemptionTest : public ControllerFixture {
 protected:
  // The env of every worker of the plans of `job`'s `attempt` sent so far.
  std::vector<std::map<std::string, std::string>> WorkerEnvs(const std::string& job,
                                                             uint32_t attempt) {
    std::vector<std::map<std::string, std::string>> out;
    for (const auto& [node, plan] : sink_.Plans()) {
      if (plan.job() != job || plan.attempt() != attempt) continue;
      for (const auto& w : plan.workers()) out.emplace_back(w.env().begin(), w.env().end());
    }
    return out;
  }
  std::vector<v1::StopWorkers> StopsOf(const std::string& job) {
    std::vector<v1::StopWorkers> out;
    for (const auto& [node, stop] : sink_.Stops()) {
      if (stop.job() == job) out.push_back(stop);
    }
    return out;
  }
  static const v1::JobEvent* Event(const v1::JobStatus& st, const std::string& reason) {
    for (const auto& e : st.events()) {
      if (e.reason() == reason) return &e;
    }
    return nullptr;
  }
};

TEST_F(PreemptionTest, PreemptSuspendsAndRequeuesWarnsFirstAndUsesNoRestart) {
  ApplyOk(RuntimeYaml("once", "", 1) + "---\n" + JobYaml("low", 2, 1, "once"));
  ReportAll("low", kStarted, kT0 + 100);
  ASSERT_EQ(PhaseName(JobOrDie("low")), "Running");

  auto r = controller_->Preempt("low", kBy, kT0 + 1000);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->changed());
  EXPECT_EQ(PhaseName(*r), "Suspended");
  const v1::JobStatus& st = JobOrDie("low");
  EXPECT_EQ(PhaseName(st), "Suspended");
  EXPECT_EQ(st.reason(), "Preempted");
  ASSERT_NE(Cond(st, "Suspended"), nullptr);
  EXPECT_EQ(Cond(st, "Suspended")->status(), "True");
  EXPECT_EQ(Cond(st, "Suspended")->reason(), "Preempted");
  EXPECT_EQ(Cond(st, "Failed"), nullptr);
  EXPECT_EQ(st.preemptions(), 1u);
  EXPECT_TRUE(st.preempted());
  ASSERT_EQ(st.attempts_size(), 1);
  EXPECT_EQ(ResultName(st.attempts(0)), "Stopped");
  EXPECT_EQ(st.attempts(0).cause(), std::string("preempted by ") + kBy);
  // The events: who preempted it, and the warning the ranks got.
  const v1::JobEvent* preempted = Event(st, "Preempted");
  ASSERT_NE(preempted, nullptr);
  EXPECT_THAT(preempted->message(), HasSubstr(std::string("Preempted by ") + kBy));
  const v1::JobEvent* warned = Event(st, "PreemptionWarning");
  ASSERT_NE(warned, nullptr);
  EXPECT_EQ(warned->type(), "Warning");
  EXPECT_THAT(warned->message(), HasSubstr("SIGUSR1 sent to every rank; SIGTERM in 30 s"));
  // Every node of the attempt is told to stop with the warning first.
  auto stops = StopsOf("low");
  ASSERT_EQ(stops.size(), 2u);
  for (const auto& s : stops) {
    EXPECT_EQ(s.attempt(), 1u);
    EXPECT_EQ(s.warning_signal(), SIGUSR1);
    EXPECT_EQ(s.warning_grace_ms(), 30000u);
    EXPECT_FALSE(s.warn_only());
  }
  // Stored before the answer, spec (suspend: true) and counter included.
  auto stored = Stored("low");
  ASSERT_TRUE(stored);
  EXPECT_EQ(PhaseName(stored->status), "Suspended");
  EXPECT_EQ(stored->status.preemptions(), 1u);
  EXPECT_TRUE(stored->status.preempted());
  EXPECT_THAT(stored->spec_yaml, HasSubstr("suspend: true"));

  // A suspended job has nothing to preempt.
  auto again = controller_->Preempt("low", kBy, kT0 + 1100);
  EXPECT_EQ(again.status().code(), ErrorCode::kInvalid);
  EXPECT_EQ(controller_->Preempt("nope", kBy, kT0).status().code(), ErrorCode::kNotFound);

  // The ranks checkpoint and exit; the job is resumed (as admission will): a new attempt, told.
  ReportAll("low", kExited, kT0 + 2000, 0);
  ASSERT_TRUE(controller_->SetSuspend("low", false, kT0 + 3000).ok());
  ASSERT_EQ(JobOrDie("low").attempt(), 2u);
  EXPECT_FALSE(JobOrDie("low").preempted());
  auto envs = WorkerEnvs("low", 2);
  ASSERT_EQ(envs.size(), 2u);
  for (const auto& env : envs) {
    EXPECT_EQ(env.at("TRAINLET_ATTEMPT"), "2");
    EXPECT_EQ(env.at("TRAINLET_PREEMPTED"), "1");
    EXPECT_EQ(env.at("TRAINLET_RESTART_REASON"), "preempted");
  }
  // The first attempt knew of no preemption.
  for (const auto& env : WorkerEnvs("low", 1)) EXPECT_FALSE(env.contains("TRAINLET_PREEMPTED"));

  // The preemption used no restart: attempt 2 fails and the one restart is still there; the
  // restart is not "after a preemption".
  ReportAll("low", kStarted, kT0 + 3100);
  ReportAll("low", kExited, kT0 + 3200, 3);
  EXPECT_EQ(PhaseName(JobOrDie("low")), "Restarting");
  controller_->Schedule(kT0 + 3200 + 1000);
  ASSERT_EQ(JobOrDie("low").attempt(), 3u);
  for (const auto& env : WorkerEnvs("low", 3)) {
    EXPECT_FALSE(env.contains("TRAINLET_PREEMPTED"));
    EXPECT_EQ(env.at("TRAINLET_RESTART_REASON"), "failed");
  }
  EXPECT_EQ(JobOrDie("low").preemptions(), 1u);

  // The counter survives a coordinator restart.
  ASSERT_TRUE(controller_->Flush().ok());
  MakeController();
  EXPECT_EQ(JobOrDie("low").preemptions(), 1u);
}

// Issue 19: a coordinator restarted while the first attempt after a preemption starts renders the
// plans a node lost again from the store (AttemptLauncher::Replan). They must tell the ranks what
// the first ones did: the preemption flag was cleared when that attempt was placed, so the plans
// made again lacked TRAINLET_PREEMPTED=1.
TEST_F(PreemptionTest, APlanRenderedAgainAfterACoordinatorRestartStillTellsOfThePreemption) {
  ApplyOk(JobYaml("low", 1, 1));
  ReportAll("low", kStarted, kT0 + 100);
  ASSERT_TRUE(controller_->Preempt("low", kBy, kT0 + 1000).ok());
  ReportAll("low", kExited, kT0 + 2000, 0);
  ASSERT_TRUE(controller_->SetSuspend("low", false, kT0 + 3000).ok());
  ASSERT_EQ(JobOrDie("low").attempt(), 2u);
  ASSERT_EQ(WorkerEnvs("low", 2).size(), 1u);
  ASSERT_EQ(WorkerEnvs("low", 2)[0].at("TRAINLET_PREEMPTED"), "1");

  // The coordinator restarts before the node got the plan; the node reports holding nothing.
  ASSERT_TRUE(controller_->Flush().ok());
  MakeController();
  sink_.sent.clear();
  const std::string node = JobOrDie("low").placement(0);
  const NodeEntry* e = registry_.Find(node);
  ASSERT_NE(e, nullptr);
  v1::NodeInfo info = e->info;
  info.set_reports_attempts(true);
  ASSERT_TRUE(
      registry_.Register(info, "rid-" + node, "key-" + node, NodeRegistry::Clock::now(), kT0 + 4000)
          .ok());
  controller_->Schedule(kT0 + 4000);
  const auto envs = WorkerEnvs("low", 2);
  ASSERT_EQ(envs.size(), 1u) << "the lost plan was not made again";
  EXPECT_EQ(envs[0].at("TRAINLET_ATTEMPT"), "2");
  ASSERT_TRUE(envs[0].contains("TRAINLET_PREEMPTED"));
  EXPECT_EQ(envs[0].at("TRAINLET_PREEMPTED"), "1");
  EXPECT_EQ(envs[0].at("TRAINLET_RESTART_REASON"), "preempted");
}

TEST_F(PreemptionTest, AJobNotYetPlacedIsPreemptedWithoutAWarning) {
  ApplyOk(JobYaml("big", 3, 5));  // never fits: 4 slots a node
  ASSERT_EQ(PhaseName(JobOrDie("big")), "Pending");
  auto r = controller_->Preempt("big", kBy, kT0 + 10);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(PhaseName(JobOrDie("big")), "Suspended");
  EXPECT_TRUE(StopsOf("big").empty());
  EXPECT_EQ(Event(JobOrDie("big"), "PreemptionWarning"), nullptr);
  EXPECT_EQ(JobOrDie("big").preemptions(), 1u);
}

TEST_F(PreemptionTest, AnnotationsAndConfigSetTheSignalAndGrace) {
  options_.preemption_grace = std::chrono::seconds(7);
  MakeController();
  ApplyOk(WithAnnotations(JobYaml("a", 1, 1), {"trainlet.io/preemption-signal: SIGUSR2",
                                               "trainlet.io/preemption-grace-seconds: \"5\""}));
  ApplyOk(WithAnnotations(JobYaml("b", 1, 1), {"trainlet.io/preemption-signal: \"12\""}));
  ApplyOk(WithAnnotations(JobYaml("c", 1, 1), {"trainlet.io/preemption-signal: hup"}));
  for (const char* job : {"a", "b", "c"}) {
    ReportAll(job, kStarted, kT0 + 10);
    ASSERT_TRUE(controller_->Preempt(job, kBy, kT0 + 20).ok()) << job;
  }
  ASSERT_EQ(StopsOf("a").size(), 1u);
  EXPECT_EQ(StopsOf("a")[0].warning_signal(), SIGUSR2);
  EXPECT_EQ(StopsOf("a")[0].warning_grace_ms(), 5000u);
  ASSERT_EQ(StopsOf("b").size(), 1u);
  EXPECT_EQ(StopsOf("b")[0].warning_signal(), SIGUSR2);
  EXPECT_EQ(StopsOf("b")[0].warning_grace_ms(), 7000u);  // the coordinator's default
  ASSERT_EQ(StopsOf("c").size(), 1u);
  EXPECT_EQ(StopsOf("c")[0].warning_signal(), SIGHUP);
  EXPECT_THAT(Event(JobOrDie("a"), "PreemptionWarning")->message(),
              HasSubstr("SIGUSR2 sent to every rank; SIGTERM in 5 s"));
}

TEST_F(PreemptionTest, BadAnnotationsAreRefusedAtApplyNamingThem) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"trainlet.io/preemption-signal", "SIGKILL"},
      {"trainlet.io/preemption-signal", "\"9\""},
      {"trainlet.io/preemption-signal", "SIGNOPE"},
      {"trainlet.io/preemption-signal", "\"\""},
      {"trainlet.io/preemption-grace-seconds", "\"-1\""},
      {"trainlet.io/preemption-grace-seconds", "\"86401\""},
      {"trainlet.io/preemption-grace-seconds", "\"1.5\""},
      {"trainlet.io/preemption-grace-seconds", "30s"},
  };
  for (const auto& [key, value] : bad) {
    auto r = controller_->Apply(WithAnnotations(JobYaml("bad", 1, 1), {key + ": " + value}),
                                "bad.yaml", kT0);
    ASSERT_FALSE(r.ok()) << key << "=" << value;
    EXPECT_EQ(r.status().code(), ErrorCode::kInvalid) << value;
    EXPECT_THAT(r.status().message(), HasSubstr("metadata.annotations[" + key + "]")) << value;
  }
  EXPECT_TRUE(StoredNames().empty());
}

TEST_F(PreemptionTest, DeadlineWarningComesTheGraceBeforeTheDeadline) {
  ApplyOk(WithAnnotations(WithSpecLine(JobYaml("dl", 2, 1), "  activeDeadlineSeconds: 30\n"),
                          {"trainlet.io/preemption-grace-seconds: \"10\""}));
  ApplyOk(WithAnnotations(WithSpecLine(JobYaml("off", 1, 1), "  activeDeadlineSeconds: 30\n"),
                          {"trainlet.io/deadline-warning: \"false\""}));
  ReportAll("dl", kStarted, kT0 + 100);
  ReportAll("off", kStarted, kT0 + 100);
  EXPECT_EQ(controller_->NextWakeMs(), kT0 + 20'000);

  controller_->Schedule(kT0 + 19'999);
  EXPECT_TRUE(StopsOf("dl").empty());
  controller_->Schedule(kT0 + 20'000);
  auto warns = StopsOf("dl");
  ASSERT_EQ(warns.size(), 2u);  // one per node; nothing stops
  for (const auto& w : warns) {
    EXPECT_TRUE(w.warn_only());
    EXPECT_EQ(w.warning_signal(), SIGUSR1);
    EXPECT_EQ(w.attempt(), 1u);
  }
  EXPECT_EQ(PhaseName(JobOrDie("dl")), "Running");
  const v1::JobEvent* ev = Event(JobOrDie("dl"), "DeadlineWarning");
  ASSERT_NE(ev, nullptr);
  EXPECT_EQ(ev->type(), "Warning");
  EXPECT_THAT(ev->message(), HasSubstr("SIGUSR1 sent to every rank; SIGTERM in 10 s"));
  // A job that turned it off is not warned.
  EXPECT_TRUE(StopsOf("off").empty());
  // Once: the next wake-up is the deadline itself.
  EXPECT_EQ(controller_->NextWakeMs(), kT0 + 30'000);
  controller_->Schedule(kT0 + 25'000);
  EXPECT_EQ(StopsOf("dl").size(), 2u);

  // At the deadline the job still fails with DeadlineExceeded.
  controller_->Schedule(kT0 + 30'000);
  EXPECT_EQ(PhaseName(JobOrDie("dl")), "Failed");
  EXPECT_EQ(JobOrDie("dl").reason(), "DeadlineExceeded");
  auto all = StopsOf("dl");
  ASSERT_EQ(all.size(), 4u);
  EXPECT_FALSE(all[2].warn_only());
}

// Without annotations the warning is on: the coordinator's 30 s grace, but never earlier than
// half-way to the deadline, so a 20 s deadline is warned at 10 s, not at its start.
TEST_F(PreemptionTest, DeadlineWarningIsOnByDefaultAndAtMostHalfTheDeadlineEarly) {
  ApplyOk(WithSpecLine(JobYaml("plain", 1, 1), "  activeDeadlineSeconds: 20\n"));
  ReportAll("plain", kStarted, kT0 + 100);
  EXPECT_EQ(controller_->NextWakeMs(), kT0 + 10'000);
  controller_->Schedule(kT0 + 9'999);
  EXPECT_TRUE(StopsOf("plain").empty());
  controller_->Schedule(kT0 + 10'000);
  auto warns = StopsOf("plain");
  ASSERT_EQ(warns.size(), 1u);
  EXPECT_TRUE(warns[0].warn_only());
  EXPECT_EQ(warns[0].warning_signal(), SIGUSR1);
  EXPECT_EQ(JobOrDie("plain").deadline_warned_attempt(), 1u);
}

// An operator can turn the default off; a job that asks (either annotation) is still warned.
TEST_F(PreemptionTest, DeadlineWarningOffByConfigWarnsOnlyJobsThatAsk) {
  options_.deadline_warning = false;
  MakeController();
  ApplyOk(WithSpecLine(JobYaml("plain", 1, 1), "  activeDeadlineSeconds: 20\n"));
  ApplyOk(WithAnnotations(WithSpecLine(JobYaml("asks", 1, 1), "  activeDeadlineSeconds: 20\n"),
                          {"trainlet.io/deadline-warning: \"true\""}));
  ReportAll("plain", kStarted, kT0 + 100);
  ReportAll("asks", kStarted, kT0 + 100);
  controller_->Schedule(kT0 + 10'000);
  EXPECT_TRUE(StopsOf("plain").empty());
  EXPECT_EQ(StopsOf("asks").size(), 1u);
  EXPECT_EQ(JobOrDie("plain").deadline_warned_attempt(), 0u);
}

// However the warned attempt ends, the deadline ended it: ranks that caught the signal,
// checkpointed and exited 0 do not make the job Succeeded, and a rank killed by the signal it did
// not catch uses no restart (maxRestarts 3).
TEST_F(PreemptionTest, AnAttemptThatEndsAfterItsDeadlineWarningIsDeadlineExceeded) {
  ApplyOk(RuntimeYaml("three", "", 3) + "---\n" +
          WithSpecLine(JobYaml("ok", 2, 1, "three"), "  activeDeadlineSeconds: 30\n") + "---\n" +
          WithSpecLine(JobYaml("killed", 2, 1, "three"), "  activeDeadlineSeconds: 30\n") +
          "---\n" + WithSpecLine(JobYaml("early", 1, 1, "three"), "  activeDeadlineSeconds: 30\n"));
  for (const char* j : {"ok", "killed", "early"}) ReportAll(j, kStarted, kT0 + 100);
  // Before the warning an exit is judged as always: "early" succeeds.
  ReportAll("early", kExited, kT0 + 1'000);
  EXPECT_EQ(PhaseName(JobOrDie("early")), "Succeeded");
  controller_->Schedule(kT0 + 15'000);  // the warning (grace 30 s, at most half of 30 s)
  ASSERT_EQ(StopsOf("ok").size(), 2u);
  ASSERT_TRUE(StopsOf("early").empty());

  ReportAll("ok", kExited, kT0 + 16'000);
  const v1::JobStatus& ok = JobOrDie("ok");
  EXPECT_EQ(PhaseName(ok), "Failed");
  EXPECT_EQ(ok.reason(), "DeadlineExceeded");
  EXPECT_THAT(ok.attempts(0).cause(), HasSubstr("all 2 ranks exited 0"));
  EXPECT_EQ(ResultName(ok.attempts(0)), "Failed");

  Report("killed", 0, kExited, kT0 + 16'000, 0, SIGUSR1);
  const v1::JobStatus& killed = JobOrDie("killed");
  EXPECT_EQ(PhaseName(killed), "Failed");
  EXPECT_EQ(killed.reason(), "DeadlineExceeded");
  EXPECT_THAT(killed.attempts(0).cause(),
              HasSubstr("after its warning before activeDeadlineSeconds"));
  EXPECT_EQ(killed.attempts_size(), 1);  // no restart
  auto stops = StopsOf("killed");
  EXPECT_FALSE(stops.back().warn_only());  // the other rank is stopped
}

// The warned attempt is stored: a restarted coordinator does not warn it again, and still counts
// its end as the deadline's.
TEST_F(PreemptionTest, ARestartedCoordinatorKeepsTheDeadlineWarning) {
  ApplyOk(WithSpecLine(JobYaml("dl", 1, 1), "  activeDeadlineSeconds: 30\n"));
  ReportAll("dl", kStarted, kT0 + 100);
  controller_->Schedule(kT0 + 15'000);
  ASSERT_EQ(StopsOf("dl").size(), 1u);
  ASSERT_TRUE(controller_->Flush().ok());
  ASSERT_EQ(Stored("dl")->status.deadline_warned_attempt(), 1u);

  MakeController();
  controller_->Schedule(kT0 + 16'000);
  EXPECT_EQ(StopsOf("dl").size(), 1u);  // not warned twice
  EXPECT_EQ(controller_->NextWakeMs(), kT0 + 30'000);
  ReportAll("dl", kExited, kT0 + 17'000);
  EXPECT_EQ(JobOrDie("dl").reason(), "DeadlineExceeded");
}

TEST_F(PreemptionTest, DrainForceWarnsBeforeTheStop) {
  ApplyOk(WithAnnotations(JobYaml("d", 1, 1), {"trainlet.io/preemption-grace-seconds: \"3\""}));
  ReportAll("d", kStarted, kT0 + 100);
  const std::string node = JobOrDie("d").placement(0);
  auto failed = controller_->FailJobsOnNode(node, "node drained", kT0 + 200);
  EXPECT_THAT(failed, ::testing::ElementsAre("d"));
  auto stops = StopsOf("d");
  ASSERT_GE(stops.size(), 1u);
  EXPECT_EQ(stops[0].warning_signal(), SIGUSR1);
  EXPECT_EQ(stops[0].warning_grace_ms(), 3000u);
  EXPECT_FALSE(stops[0].warn_only());
  const v1::JobEvent* ev = Event(JobOrDie("d"), "DrainWarning");
  ASSERT_NE(ev, nullptr);
  EXPECT_THAT(ev->message(),
              HasSubstr("SIGUSR1 sent to every rank; SIGTERM in 3 s (node drained)"));
  // A drain is a failure of the attempt, as before: it counts (plain allows no restart).
  EXPECT_EQ(ResultName(JobOrDie("d").attempts(0)), "Failed");
  EXPECT_EQ(PhaseName(JobOrDie("d")), "Failed");
  EXPECT_EQ(JobOrDie("d").preemptions(), 0u);
}

}  // namespace
}  // namespace trainlet::coordinator
