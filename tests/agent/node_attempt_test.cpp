// NodeAttempt's state table, and NodeAttempts over real services: port reservations on
// 127.0.0.1, a rendezvous server with no socket, and a supervisor without a steps directory (its
// launches fail at once, which is all the table needs) or, in the last test, real trainlet-step
// processes, to see a replaced attempt's ranks killed.
#include "agent/node_attempt.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <filesystem>
#include <set>
#include <thread>
#include <utility>

#include "tests/common/supervisor_fixture.h"
#include "tests/common/test_dir.h"

namespace trainlet::agent {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using S = AttemptState;
using T = AttemptTrigger;

constexpr std::array kStates = {S::kNew,     S::kPortsHeld, S::kLaunching,
                                S::kRunning, S::kStopping,  S::kEnded};
constexpr std::array kTriggers = {T::kPortsReserved, T::kPlanArrived, T::kLaunched,  T::kAdopted,
                                  T::kStopAsked,     T::kReplaced,    T::kRanksEnded};

TEST(AttemptStateTable, EachPairAppearsOnceAndNextStateFollowsIt) {
  std::set<std::pair<S, T>> seen;
  for (const auto& t : kAttemptTransitions) {
    EXPECT_TRUE(seen.insert({t.from, t.trigger}).second)
        << AttemptStateName(t.from) << " + " << AttemptTriggerName(t.trigger) << " listed twice";
    EXPECT_EQ(NextState(t.from, t.trigger), t.to);
    EXPECT_NE(t.from, S::kEnded) << "Ended is final";
    EXPECT_NE(t.to, S::kNew) << "nothing goes back to New";
  }
  for (S s : kStates) {
    for (T t : kTriggers) {
      if (!seen.contains({s, t})) {
        EXPECT_FALSE(NextState(s, t).has_value())
            << AttemptStateName(s) << " + " << AttemptTriggerName(t);
      }
    }
  }
}

TEST(AttemptStateTable, TheLifeOfAnAttempt) {
  EXPECT_EQ(NextState(S::kNew, T::kPortsReserved), S::kPortsHeld);
  EXPECT_EQ(NextState(S::kPortsHeld, T::kPlanArrived), S::kLaunching);
  EXPECT_EQ(NextState(S::kLaunching, T::kLaunched), S::kRunning);
  EXPECT_EQ(NextState(S::kRunning, T::kStopAsked), S::kStopping);
  EXPECT_EQ(NextState(S::kStopping, T::kRanksEnded), S::kEnded);
  // Forbidden: a stopped attempt never launches again, nothing is stopped mid-launch.
  EXPECT_FALSE(NextState(S::kStopping, T::kPlanArrived));
  EXPECT_FALSE(NextState(S::kEnded, T::kPlanArrived));
  EXPECT_FALSE(NextState(S::kEnded, T::kPortsReserved));
  EXPECT_FALSE(NextState(S::kLaunching, T::kStopAsked));
  EXPECT_FALSE(NextState(S::kNew, T::kStopAsked));
  EXPECT_STREQ(AttemptStateName(S::kPortsHeld), "PortsHeld");
  EXPECT_STREQ(AttemptTriggerName(T::kRanksEnded), "RanksEnded");
}

TEST(AttemptStateTable, ApplyRefusesWhatTheTableForbids) {
  NodeAttempt a("job", 1, AttemptServices{});
  EXPECT_EQ(a.state(), S::kNew);
  EXPECT_FALSE(a.Apply(T::kLaunched));
  EXPECT_EQ(a.state(), S::kNew);
  EXPECT_TRUE(a.Apply(T::kAdopted));
  EXPECT_EQ(a.state(), S::kRunning);
  EXPECT_TRUE(a.Apply(T::kRanksEnded));
  EXPECT_FALSE(a.Apply(T::kStopAsked));
  EXPECT_EQ(a.state(), S::kEnded);
}

class NodeAttemptsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { testing::BlockAgentSignals(); }

  void SetUp() override {
    auto ports = PortReservations::Create("127.0.0.1", PortRange{24600, 24699});
    ASSERT_TRUE(ports.ok()) << ports.status().ToString();
    ports_ = std::make_unique<PortReservations>(std::move(ports).value());
    rendezvous_ = std::make_unique<RendezvousServer>(
        "n1", dir_.path(), [this](v1::Envelope e) { sent_.push_back(e); });
    spawner_ = MakePosixProcessSpawner();
    supervisor_ = std::make_unique<WorkerSupervisor>(spawner_.get(), std::vector<std::string>{});
    attempts_.Attach({ports_.get(), rendezvous_.get(), supervisor_.get()});
  }

  v1::PortsReserved Reserve(uint32_t attempt, uint32_t count) {
    v1::ReservePorts r;
    r.set_job("job");
    r.set_attempt(attempt);
    r.set_count(count);
    return attempts_.ReservePorts(r, Clock::now());
  }

  static v1::LaunchPlan Plan(uint32_t attempt, uint32_t grace_ms = 0, const std::string& uid = "") {
    v1::LaunchPlan plan;
    plan.set_job("job");
    plan.set_job_uid(uid);
    plan.set_attempt(attempt);
    plan.set_stop_grace_ms(grace_ms);
    auto* w = plan.add_workers();
    w->set_rank(0);
    w->add_argv("/bin/true");
    return plan;
  }

  // Ranks under a real trainlet-step from here on, and `plan` begun: its attempt, or null.
  NodeAttempt* BeginUnderSteps(const v1::LaunchPlan& plan) {
    supervisor_ = std::make_unique<WorkerSupervisor>(spawner_.get(), std::vector<std::string>{},
                                                     testing::StepOptionsUnder(dir_.path()));
    attempts_.Attach({ports_.get(), rendezvous_.get(), supervisor_.get()});
    std::string why;
    bool refused = false;
    return attempts_.BeginPlan(plan, std::chrono::steady_clock::now(), &why, &refused);
  }

  // Reaps (ticking the supervisor) until an exit comes or `deadline` passes.
  std::vector<WorkerExit> ReapFirstExit(Clock::time_point deadline) {
    std::vector<WorkerExit> exits;
    while (exits.empty() && Clock::now() < deadline) {
      supervisor_->Tick(Clock::now());
      for (auto& e : supervisor_->Reap()) exits.push_back(e);
      std::this_thread::sleep_for(10ms);
    }
    return exits;
  }

  static WorkerLaunch LaunchOf(const v1::LaunchPlan& plan) {
    WorkerLaunch l;
    l.job = plan.job();
    l.attempt = plan.attempt();
    l.argv = {"/bin/true"};
    return l;
  }

  // A plan that arrives and is launched (every rank fails: no steps directory here).
  NodeAttempt* PlanAndLaunch(uint32_t attempt, uint32_t grace_ms = 0, const std::string& uid = "") {
    std::string why;
    bool refused = false;
    const v1::LaunchPlan plan = Plan(attempt, grace_ms, uid);
    NodeAttempt* a = attempts_.BeginPlan(plan, std::chrono::steady_clock::now(), &why, &refused);
    EXPECT_NE(a, nullptr) << why;
    if (a == nullptr) return nullptr;
    EXPECT_EQ(a->state(), S::kLaunching);
    EXPECT_TRUE(a->HandOverPorts().ok());
    a->JoinRendezvous({0});
    auto started = a->Launch({LaunchOf(plan)}, Status::Ok());
    EXPECT_EQ(started.size(), 1u);
    EXPECT_EQ(a->state(), S::kRunning);
    return a;
  }

  testing::TempDir dir_;
  std::vector<v1::Envelope> sent_;
  std::unique_ptr<PortReservations> ports_;
  std::unique_ptr<RendezvousServer> rendezvous_;
  std::unique_ptr<ProcessSpawner> spawner_;
  std::unique_ptr<WorkerSupervisor> supervisor_;
  NodeAttempts attempts_;
};

TEST_F(NodeAttemptsTest, PortsHeldUntilThePlanThenHandedOver) {
  const v1::PortsReserved first = Reserve(1, 2);
  ASSERT_TRUE(first.error().empty()) << first.error();
  ASSERT_EQ(first.ports_size(), 2);
  EXPECT_EQ(attempts_.Find("job", 1)->state(), S::kPortsHeld);
  EXPECT_EQ(ports_->held_sockets(), 2u);
  // Asked again (a resent request): the same ports.
  const v1::PortsReserved again = Reserve(1, 2);
  EXPECT_EQ(again.ports(0), first.ports(0));
  EXPECT_EQ(attempts_.latest("job"), 0u);  // only a plan makes an attempt the latest

  PlanAndLaunch(1);
  EXPECT_EQ(ports_->held_sockets(), 0u);  // handed over to the ranks
  EXPECT_EQ(ports_->owned(), 2u);         // and still theirs
  EXPECT_EQ(attempts_.latest("job"), 1u);
  EXPECT_EQ(rendezvous_->attempts(), 1u);
}

TEST_F(NodeAttemptsTest, ReservationsRefusedForOlderAttemptsAndTooManyPorts) {
  PlanAndLaunch(2);
  EXPECT_NE(Reserve(1, 1).error().find("older than attempt 2"), std::string::npos);
  EXPECT_NE(Reserve(3, NodeAttempts::kMaxPortsPerAttempt + 1).error().find("at most 1024"),
            std::string::npos);
  EXPECT_EQ(attempts_.Find("job", 1), nullptr);
  EXPECT_EQ(attempts_.Find("job", 3), nullptr);
}

TEST_F(NodeAttemptsTest, ANewerPlanReplacesTheOlderAttempts) {
  ASSERT_TRUE(Reserve(1, 1).error().empty());
  PlanAndLaunch(1, 2500);
  EXPECT_EQ(attempts_.StopGrace("job"), 2500ms);
  ASSERT_TRUE(Reserve(2, 1).error().empty());
  ASSERT_TRUE(Reserve(3, 1).error().empty());
  EXPECT_EQ(ports_->owned(), 3u);
  PlanAndLaunch(3);
  EXPECT_EQ(attempts_.latest("job"), 3u);
  EXPECT_EQ(attempts_.StopGrace("job"), kDefaultStopGrace);    // attempt 3's plan names none
  EXPECT_EQ(attempts_.Find("job", 1)->state(), S::kStopping);  // its ranks are being killed
  EXPECT_EQ(attempts_.Find("job", 2), nullptr);  // held ports only: ended and forgotten
  EXPECT_EQ(ports_->owned(), 1u);                // attempt 3's
  EXPECT_EQ(rendezvous_->attempts(), 1u);        // attempt 1's was ended

  // A plan for an older attempt is ignored; the table is left as it was.
  std::string why;
  bool refused = true;
  EXPECT_EQ(attempts_.BeginPlan(Plan(2), std::chrono::steady_clock::now(), &why, &refused),
            nullptr);
  EXPECT_FALSE(refused);
  EXPECT_EQ(why, "attempt 3 is newer");

  // Attempt 1's ranks end: it is forgotten, the latest stays.
  attempts_.RanksEnded("job", 1);
  EXPECT_EQ(attempts_.Find("job", 1), nullptr);
  EXPECT_EQ(attempts_.size(), 1u);
}

TEST_F(NodeAttemptsTest, StopEndsHeldPortsAndStopsRunningRanks) {
  ASSERT_TRUE(Reserve(4, 2).error().empty());
  attempts_.Stop("job", 4, "placement failed", Clock::now());
  EXPECT_EQ(attempts_.Find("job", 4), nullptr);  // ended with nothing run, and not the latest
  EXPECT_EQ(ports_->owned(), 0u);

  PlanAndLaunch(5, 1200);
  attempts_.Stop("job", 5, "job deleted", Clock::now());
  EXPECT_EQ(attempts_.Find("job", 5)->state(), S::kStopping);
  EXPECT_EQ(rendezvous_->attempts(), 0u);
  EXPECT_EQ(attempts_.StopGrace("job"), 1200ms);
  attempts_.RanksEnded("job", 5);
  EXPECT_EQ(attempts_.Find("job", 5)->state(), S::kEnded);  // the latest stays, ended
  EXPECT_EQ(attempts_.StopGrace("job"), 1200ms);
  EXPECT_EQ(attempts_.jobs(), std::vector<std::string>{"job"});
}

// A job deleted and created again under the same name counts its attempts from 1 again: an
// attempt number that comes back after its attempt stopped or ended is a new attempt.
TEST_F(NodeAttemptsTest, AnAttemptNumberThatComesBackIsANewAttempt) {
  PlanAndLaunch(1, 1500);
  attempts_.Stop("job", 0, "job deleted", Clock::now());
  EXPECT_EQ(attempts_.Find("job", 1)->state(), S::kStopping);
  const v1::PortsReserved again = Reserve(1, 2);  // the job, created again
  EXPECT_TRUE(again.error().empty()) << again.error();
  EXPECT_EQ(attempts_.Find("job", 1)->state(), S::kPortsHeld);
  EXPECT_EQ(attempts_.StopGrace("job"), kDefaultStopGrace);  // no plan of the new one yet
  PlanAndLaunch(1);
  attempts_.RanksEnded("job", 1);
  EXPECT_EQ(attempts_.Find("job", 1)->state(), S::kEnded);
  PlanAndLaunch(1);  // and again, straight from a plan
  EXPECT_EQ(ports_->owned(), 0u);
}

// A deleted job leaves the table once nothing of it is held (PurgeJob), so the name comes back
// from attempt 1 however many attempts the old one ran here. Before, the table kept every job's
// latest attempt forever: the new job's plans were ignored as older ("attempt 3 is newer") and
// it waited Pending for ever, and the table grew with every job the node ran.
TEST_F(NodeAttemptsTest, ADeletedJobLeavesTheTableAndItsNameComesBackFromAttemptOne) {
  PlanAndLaunch(3, 0, "u1");
  attempts_.RanksEnded("job", 3);
  attempts_.Purge("job", "u1");
  EXPECT_TRUE(attempts_.jobs().empty());
  EXPECT_EQ(attempts_.latest("job"), 0u);
  EXPECT_TRUE(attempts_.Report().empty());
  const v1::PortsReserved again = Reserve(1, 1);  // the job, created again: ports first
  EXPECT_TRUE(again.error().empty()) << again.error();
  ASSERT_NE(PlanAndLaunch(1, 0, "u2"), nullptr);
  EXPECT_EQ(attempts_.latest("job"), 1u);
  // A purge of another incarnation (the old one's, late) leaves the new one alone.
  attempts_.Purge("job", "u1");
  EXPECT_EQ(attempts_.Find("job", 1)->state(), S::kRunning);
  attempts_.Purge("unknown", "");  // nothing to forget
}

// Purged while its ranks still stop: it stays until they have ended, then goes.
TEST_F(NodeAttemptsTest, APurgeWhileRanksStopWaitsForThem) {
  PlanAndLaunch(2);
  attempts_.Stop("job", 0, "job deleted", Clock::now());
  attempts_.Purge("job", "");
  EXPECT_EQ(attempts_.Find("job", 2)->state(), S::kStopping);
  attempts_.RanksEnded("job", 2);
  EXPECT_TRUE(attempts_.jobs().empty());
  // Ports held alone, purged: stopping them ends everything, and the job goes at once.
  ASSERT_TRUE(Reserve(4, 1).error().empty());
  attempts_.Purge("job", "");
  EXPECT_EQ(attempts_.Find("job", 4)->state(), S::kPortsHeld);
  attempts_.Stop("job", 0, "job deleted", Clock::now());
  EXPECT_TRUE(attempts_.jobs().empty());
  EXPECT_EQ(ports_->owned(), 0u);
}

// The node missed the purge (it was cut off when the job was deleted): a plan of another
// incarnation (its job_uid) replaces what the table holds of the name once nothing of it runs,
// and stops what still does first. The plan is ignored, not refused, meanwhile: the coordinator
// sends it again, and no rank of the new job fails for it.
TEST_F(NodeAttemptsTest, APlanOfAnotherIncarnationStopsTheOldOneThenStarts) {
  PlanAndLaunch(3, 0, "u1");
  std::string why;
  bool refused = true;
  EXPECT_EQ(attempts_.BeginPlan(Plan(1, 0, "u2"), Clock::now(), &why, &refused), nullptr);
  EXPECT_FALSE(refused);
  EXPECT_THAT(why, ::testing::HasSubstr("deleted trainjob/job"));
  EXPECT_EQ(attempts_.Find("job", 3)->state(), S::kStopping);
  v1::ReservePorts ask;
  ask.set_job("job");
  ask.set_attempt(1);
  ask.set_count(1);
  ask.set_job_uid("u2");
  EXPECT_THAT(attempts_.ReservePorts(ask, Clock::now()).error(),
              ::testing::HasSubstr("still stopping"));
  attempts_.RanksEnded("job", 3);
  EXPECT_TRUE(attempts_.ReservePorts(ask, Clock::now()).error().empty());
  EXPECT_EQ(attempts_.Find("job", 3), nullptr);
  ASSERT_NE(PlanAndLaunch(1, 0, "u2"), nullptr);
  // The same incarnation, or one that does not say (a coordinator before UIDs), goes on as before.
  EXPECT_EQ(attempts_.BeginPlan(Plan(1, 0, "u2"), Clock::now(), &why, &refused), nullptr);
  EXPECT_THAT(why, ::testing::HasSubstr("copy"));
  EXPECT_EQ(attempts_.BeginPlan(Plan(1, 0, ""), Clock::now(), &why, &refused), nullptr);
  EXPECT_THAT(why, ::testing::HasSubstr("copy"));
}

// Issue 19, defect 4: the coordinator resends a plan whose arrival it did not hear of. A copy of
// the plan of an attempt that runs here starts nothing (not even a rank that already exited); a
// plan that adds ranks still starts them.
TEST_F(NodeAttemptsTest, ACopyOfThePlanOfARunningAttemptIsANoOp) {
  PlanAndLaunch(1);
  std::string why;
  bool refused = true;
  EXPECT_EQ(attempts_.BeginPlan(Plan(1), Clock::now(), &why, &refused), nullptr);
  EXPECT_FALSE(refused);
  EXPECT_THAT(why, ::testing::HasSubstr("copy"));
  EXPECT_EQ(attempts_.Find("job", 1)->state(), S::kRunning);
  v1::LaunchPlan more = Plan(1);
  more.add_workers()->set_rank(1);
  NodeAttempt* a = attempts_.BeginPlan(more, Clock::now(), &why, &refused);
  ASSERT_NE(a, nullptr) << why;
  EXPECT_EQ(a->state(), S::kLaunching);
}

// What the registration and each heartbeat report: every attempt held, with its plan or not.
TEST_F(NodeAttemptsTest, TheReportHoldsEveryAttemptAndWhetherItsPlanCame) {
  EXPECT_TRUE(attempts_.Report().empty());
  PlanAndLaunch(1);
  ASSERT_TRUE(Reserve(2, 1).error().empty());
  attempts_.Adopt("other", 4, 0, {0, 1});
  const std::vector<v1::HeldAttempt> report = attempts_.Report();
  ASSERT_EQ(report.size(), 3u);
  EXPECT_EQ(report[0].job(), "job");
  EXPECT_EQ(report[0].attempt(), 1u);
  EXPECT_TRUE(report[0].plan_received());
  EXPECT_EQ(report[1].attempt(), 2u);
  EXPECT_FALSE(report[1].plan_received());  // ports only: its plan has not come
  EXPECT_EQ(report[2].job(), "other");
  EXPECT_TRUE(report[2].plan_received());
  EXPECT_TRUE(attempts_.Find("other", 4)->Launched(1));
  // A heartbeat leaves out what has ended.
  attempts_.RanksEnded("job", 1);
  EXPECT_EQ(attempts_.Report().size(), 3u);
  const std::vector<v1::HeldAttempt> beat = attempts_.Report(/*with_ended=*/false);
  ASSERT_EQ(beat.size(), 2u);
  EXPECT_EQ(beat[0].attempt(), 2u);
}

TEST_F(NodeAttemptsTest, StopOfEveryAttemptAndOfUnknownOnes) {
  ASSERT_TRUE(Reserve(1, 1).error().empty());
  PlanAndLaunch(1);
  ASSERT_TRUE(Reserve(2, 1).error().empty());
  // An attempt the table never saw (a previous agent's ports): the services are asked anyway.
  attempts_.Stop("job", 9, "stale", Clock::now());
  EXPECT_EQ(ports_->owned(), 2u);
  attempts_.Stop("job", 0, "suspended", Clock::now());
  EXPECT_EQ(ports_->owned(), 0u);
  EXPECT_EQ(attempts_.Find("job", 1)->state(), S::kStopping);
  EXPECT_EQ(attempts_.Find("job", 2), nullptr);  // held ports only, not the latest: forgotten
}

TEST_F(NodeAttemptsTest, AdoptedAttemptsSetTheLatestAndTheGrace) {
  attempts_.Adopt("job", 3, 0);
  attempts_.Adopt("job", 2, 700);
  EXPECT_EQ(attempts_.latest("job"), 3u);
  EXPECT_EQ(attempts_.StopGrace("job"), kDefaultStopGrace);
  EXPECT_EQ(attempts_.Find("job", 2)->stop_grace(), 700ms);
  EXPECT_EQ(attempts_.Find("job", 3)->state(), S::kRunning);
  // The coordinator went silent: the ranks stop; nothing else changes.
  attempts_.StopRanks("job", Clock::now());
  EXPECT_EQ(attempts_.Find("job", 2)->state(), S::kStopping);
  EXPECT_EQ(attempts_.Find("job", 3)->state(), S::kStopping);
  EXPECT_EQ(attempts_.StopGrace("other"), kDefaultStopGrace);
  EXPECT_EQ(attempts_.latest("other"), 0u);
}

// The agent adopts its steps before its rendezvous server exists, and attaches the services after.
TEST_F(NodeAttemptsTest, AttemptsAdoptedBeforeAttachGetTheServices) {
  NodeAttempts table;
  table.Adopt("job", 2, 0);
  table.Attach({ports_.get(), rendezvous_.get(), supervisor_.get()});
  table.RanksEnded("job", 2);  // gives back its ports through the services: must not crash
  EXPECT_EQ(table.Find("job", 2)->state(), S::kEnded);
  NodeAttempt* next = nullptr;
  std::string why;
  bool refused = false;
  next = table.BeginPlan(Plan(3), std::chrono::steady_clock::now(), &why, &refused);
  ASSERT_NE(next, nullptr) << why;
  EXPECT_TRUE(next->HandOverPorts().ok());
}

TEST_F(NodeAttemptsTest, BlockedLaunchFailsEveryRankWithTheReason) {
  std::string why;
  bool refused = false;
  const v1::LaunchPlan plan = Plan(1);
  NodeAttempt* a = attempts_.BeginPlan(plan, std::chrono::steady_clock::now(), &why, &refused);
  ASSERT_NE(a, nullptr);
  auto started = a->Launch({LaunchOf(plan), LaunchOf(plan)}, InvalidError("plan file ../x: bad"));
  ASSERT_EQ(started.size(), 2u);
  for (const auto& r : started) {
    EXPECT_EQ(r.status().code(), ErrorCode::kIo);
    EXPECT_EQ(r.status().message(), "plan file ../x: bad");
  }
  EXPECT_EQ(a->state(), S::kRunning);
}

// Real ranks under trainlet-step: a newer plan SIGKILLs the replaced attempt's ranks.
TEST_F(NodeAttemptsTest, ReplacedRanksAreKilled) {
  const v1::LaunchPlan plan = Plan(1, 60000);
  NodeAttempt* a = BeginUnderSteps(plan);
  ASSERT_NE(a, nullptr);
  WorkerLaunch sleeper = LaunchOf(plan);
  sleeper.argv = {"/bin/sleep", "100"};
  auto started = a->Launch({sleeper}, Status::Ok());
  ASSERT_TRUE(started[0].ok()) << started[0].status().ToString();
  const pid_t pid = *started[0];
  EXPECT_TRUE(testing::Alive(pid));

  v1::LaunchPlan newer = Plan(2);
  std::string why;
  bool refused = false;
  ASSERT_NE(attempts_.BeginPlan(newer, std::chrono::steady_clock::now(), &why, &refused), nullptr);
  EXPECT_EQ(attempts_.Find("job", 1)->state(), S::kStopping);
  // SIGKILL at once, not after attempt 1's 60 s grace.
  const std::vector<WorkerExit> exits = ReapFirstExit(Clock::now() + 10s);
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_EQ(exits[0].signal, SIGKILL);
  attempts_.RanksEnded("job", 1);
  EXPECT_EQ(attempts_.Find("job", 1), nullptr);
  attempts_.Find("job", 2);  // Launching: the test ends it without starting anything
  supervisor_->KillAllAndWait(5s);
}

// The coordinator fell silent while the agent's loop was held: the stop comes late, and the
// lateness comes off the stop grace, so the SIGKILL lands where the coordinator's restart hold
// counts on it (here at once: 60 s late on a 60 s grace), not a whole grace after the stall.
TEST_F(NodeAttemptsTest, ALateStopKeepsItsKillTime) {
  const v1::LaunchPlan plan = Plan(1, 60000);
  NodeAttempt* a = BeginUnderSteps(plan);
  ASSERT_NE(a, nullptr);
  WorkerLaunch rank = LaunchOf(plan);
  rank.argv = {"/bin/sh", "-c", "trap '' TERM; while :; do sleep 0.05; done"};
  auto started = a->Launch({rank}, Status::Ok());
  ASSERT_TRUE(started[0].ok()) << started[0].status().ToString();

  attempts_.StopRanks("job", Clock::now(), 60s);
  EXPECT_EQ(attempts_.Find("job", 1)->state(), S::kStopping);
  const std::vector<WorkerExit> exits = ReapFirstExit(Clock::now() + 20s);
  ASSERT_EQ(exits.size(), 1u) << "the rank outlived a stop whose grace was spent";
  EXPECT_EQ(exits[0].signal, SIGKILL);
  supervisor_->KillAllAndWait(5s);
}

// StopWorkers with a warning reaches the rank as the warning signal first (preemption, issue
// 14); a warning alone (warn_only) reaches it too and moves the attempt nowhere.
TEST_F(NodeAttemptsTest, WarningsReachTheRanks) {
  const v1::LaunchPlan plan = Plan(1, 60000);
  NodeAttempt* a = BeginUnderSteps(plan);
  ASSERT_NE(a, nullptr);
  WorkerLaunch rank = LaunchOf(plan);
  // Exits 3 on SIGUSR2, 4 on SIGUSR1 (the second, after a first SIGUSR2 was noted).
  const std::string noted = (std::filesystem::path(dir_.path()) / "usr2").string();
  rank.argv = {"/bin/sh", "-c",
               "trap 'touch " + noted + "' USR2; trap 'exit 4' USR1; echo > " + noted +
                   ".ready; while :; do sleep 0.02; done"};
  auto started = a->Launch({rank}, Status::Ok());
  ASSERT_TRUE(started[0].ok()) << started[0].status().ToString();
  const auto deadline = Clock::now() + 10s;
  while (!std::filesystem::exists(noted + ".ready") && Clock::now() < deadline) {
    std::this_thread::sleep_for(5ms);
  }
  attempts_.Warn("job", 1, SIGUSR2);
  while (!std::filesystem::exists(noted) && Clock::now() < deadline) {
    std::this_thread::sleep_for(5ms);
  }
  EXPECT_TRUE(std::filesystem::exists(noted)) << "the warning did not reach the rank";
  EXPECT_EQ(attempts_.Find("job", 1)->state(), S::kRunning);

  attempts_.Stop("job", 1, "preempted", Clock::now(), StopWarning{SIGUSR1, 30s});
  EXPECT_EQ(attempts_.Find("job", 1)->state(), S::kStopping);
  const std::vector<WorkerExit> exits = ReapFirstExit(deadline);
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_EQ(exits[0].exit_code, 4);  // SIGUSR1, well before the 30 s grace
  EXPECT_EQ(exits[0].signal, 0);
  supervisor_->KillAllAndWait(5s);
}

}  // namespace
}  // namespace trainlet::agent
