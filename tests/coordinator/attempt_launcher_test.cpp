// AttemptLauncher on its own: placing an attempt, the port wait, the start timeout and stopping,
// with a fake runtime plugin, a recording NodeSink and a fake Owner standing in for
// JobController (it applies the phase table and records what it is asked).
#include "coordinator/attempt_launcher.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "coordinator/job_state_machine.h"
#include "coordinator/lifecycle_rules.h"
#include "coordinator/rank_state_machine.h"
#include "recording_sink.h"

namespace trainlet::coordinator {
namespace {

using ::testing::ElementsAre;
using testing::EnvelopeRecorder;
using ::testing::HasSubstr;

// Lays out `procs` ranks per node and asks node rank i for ports[i] ports (none past the end);
// renders one plan per node whose workers carry NODE_PORTS. `refuse` refuses the layout.
class FakePlugin : public RuntimePlugin {
 public:
  std::string_view name() const override { return "fake"; }
  PluginResult<uint32_t> ProcsPerNode(std::string_view, const v1::Topology*) const override {
    return procs;
  }
  PluginResult<AttemptLayout> Layout(const PlanRequest& req) const override {
    if (refuse) return PluginStatus(PluginErrorCode::kInvalid, "fake: no");
    AttemptLayout layout;
    for (uint32_t n = 0; n < req.nodes.size(); ++n) {
      NodeLayout& node = layout.nodes.emplace_back();
      for (uint32_t l = 0; l < procs; ++l) node.ranks.push_back({n * procs + l, l});
      node.ports = n < ports.size() ? ports[n] : 0;
    }
    return layout;
  }
  PluginResult<std::vector<v1::LaunchPlan>> Render(const PlanRequest& req,
                                                   const AttemptLayout& layout) const override {
    std::vector<v1::LaunchPlan> plans;
    for (uint32_t n = 0; n < req.nodes.size(); ++n) {
      v1::LaunchPlan& plan = plans.emplace_back();
      plan.set_job(req.job);
      plan.set_attempt(req.attempt);
      plan.set_node_rank(n);
      std::string node_ports;
      for (uint32_t p : req.nodes[n].ports) node_ports += std::to_string(p) + ";";
      for (const LaidOutRank& r : layout.nodes[n].ranks) {
        auto* w = plan.add_workers();
        w->set_rank(r.rank);
        w->set_local_rank(r.local_rank);
        w->add_argv("/bin/true");
        (*w->mutable_env())["NODE_PORTS"] = node_ports;
      }
    }
    return plans;
  }
  std::string LaunchMode(const PlanRequest&) const override { return "fake"; }

  uint32_t procs = 2;
  std::vector<uint32_t> ports;
  bool refuse = false;
};

// JobController's part, reduced to what the launcher asks: the phase table, and a record.
class FakeOwner : public AttemptLauncher::Owner {
 public:
  void Transition(JobEntry& job, JobTrigger trigger, const std::string& reason,
                  const std::string& message, int64_t now_ms) override {
    ASSERT_TRUE(ApplyTransition(job.record.status, trigger, reason, message, now_ms).ok());
    triggers.push_back(trigger);
  }
  void FailAttempt(JobEntry& job, const std::string& cause, int64_t,
                   FailureKind kind = FailureKind::kJob) override {
    failed.push_back(cause);
    kinds.push_back(kind);
    if (launcher != nullptr) launcher->Stop(job, cause);
  }
  void FailAttempt(JobEntry& job, const AttemptFailure& failure, int64_t now_ms,
                   FailureKind kind = FailureKind::kJob) override {
    failed_jobs.push_back(failure.replicated_jobs);
    FailAttempt(job, failure.message, now_ms, kind);
  }
  void MarkDirty(JobEntry&) override { ++dirty; }
  Status Flush() override {
    ++flushes;
    return flush_status;
  }

  AttemptLauncher* launcher = nullptr;
  std::vector<JobTrigger> triggers;
  std::vector<std::string> failed;
  std::vector<FailureKind> kinds;  // of each FailAttempt
  // The replicated jobs each FailAttempt of an AttemptFailure named (failure rules' targets).
  std::vector<std::vector<std::string>> failed_jobs;
  int dirty = 0;
  int flushes = 0;
  Status flush_status = Status::Ok();
};

class AttemptLauncherTest : public ::testing::Test {
 protected:
  static constexpr int64_t kT0 = 1'700'000'000'000;
  static constexpr int64_t kTimeout = 5000;

  void SetUp() override {
    for (const char* n : {"n1", "n2"}) {
      v1::NodeInfo info;
      info.set_name(n);
      info.set_hostname(n);
      info.set_address(std::string("10.0.0.") + n[1]);
      info.set_slots(4);
      ASSERT_TRUE(registry_
                      .Register(info, std::string("rid-") + n, std::string("key-") + n,
                                NodeRegistry::Clock::now(), kT0)
                      .ok());
    }
    owner_.launcher = &launcher_;
    job_.record.name = "train";
    job_.record.status.set_name("train");
    job_.record.status.set_num_nodes(2);
    job_.plugin = &plugin_;
    job_.plan_template.job = "train";
    job_.procs_per_node = 2;
    exec_.Track("train", {});
  }

  // One pass's room from used_, and what is left of it after the Place.
  bool Place(int64_t now_ms = kT0) {
    PassCapacity room(registry_, used_, used_resources_);
    const bool placed = launcher_.Place(job_, room, now_ms);
    for (const char* n : {"n1", "n2"}) free_[n] = room.FreeSlots(n);
    return placed;
  }

  std::vector<std::string> PlanNodes() const {
    std::vector<std::string> out;
    for (const auto& [node, env] : sink_.sent) {
      if (env.has_launch_plan()) out.push_back(node);
    }
    return out;
  }
  std::vector<std::string> ReserveNodes() const {
    std::vector<std::string> out;
    for (const auto& [node, env] : sink_.sent) {
      if (env.has_reserve_ports()) out.push_back(node);
    }
    return out;
  }
  std::vector<std::string> StopNodes() const {
    std::vector<std::string> out;
    for (const auto& [node, env] : sink_.sent) {
      if (env.has_stop_workers()) out.push_back(node);
    }
    return out;
  }
  v1::PortsReserved Answer(std::vector<uint32_t> ports, const std::string& error = "") const {
    v1::PortsReserved r;
    r.set_job("train");
    r.set_attempt(job_.record.status.attempt());
    for (uint32_t p : ports) r.add_ports(p);
    r.set_error(error);
    return r;
  }
  std::vector<v1::RankState> RankStates() const {
    std::vector<v1::RankState> out;
    for (const auto& r : job_.record.status.ranks()) out.push_back(r.rank_state());
    return out;
  }

  NodeRegistry registry_{std::chrono::milliseconds(1000), std::chrono::milliseconds(3000)};
  EnvelopeRecorder sink_;
  AgentCommands agents_{&sink_};
  JobEntry job_;
  ExecAuthority exec_{&registry_,
                      {"tcp://coord:7000", "server-key", 2500},
                      [this](const std::string& name) -> const v1::JobStatus* {
                        return name == job_.record.name ? &job_.record.status : nullptr;
                      }};
  FakePlugin plugin_;
  FakeOwner owner_;
  AttemptLauncher launcher_{
      &registry_, &exec_, &agents_, &owner_, {std::chrono::milliseconds(kTimeout)}};
  std::map<std::string, uint32_t> used_;
  std::map<std::string, Resources> used_resources_;
  std::map<std::string, uint32_t> free_;  // by node, after the last Place
};

TEST_F(AttemptLauncherTest, PlacesStoresThenSendsThePlansWhenNoPortIsWanted) {
  ASSERT_TRUE(Place());
  const v1::JobStatus& st = job_.record.status;
  EXPECT_EQ(PhaseOf(st), JobPhase::kStarting);
  EXPECT_THAT(owner_.triggers, ElementsAre(JobTrigger::kPlaced));
  EXPECT_EQ(owner_.flushes, 1);  // stored before any agent hears of it
  EXPECT_EQ(st.attempt(), 1u);
  EXPECT_EQ(st.launch_mode(), "fake");
  EXPECT_THAT(st.placement(), ElementsAre("n1", "n2"));
  ASSERT_EQ(st.ranks_size(), 4);
  EXPECT_THAT(RankStates(), ElementsAre(v1::RANK_STATE_PENDING, v1::RANK_STATE_PENDING,
                                        v1::RANK_STATE_PENDING, v1::RANK_STATE_PENDING));
  EXPECT_EQ(st.ranks(2).node(), "n2");
  ASSERT_EQ(st.attempts_size(), 1);
  EXPECT_EQ(st.attempts(0).started_unix_ms(), kT0);
  EXPECT_THAT(PlanNodes(), ElementsAre("n1", "n2"));
  EXPECT_TRUE(ReserveNodes().empty());
  EXPECT_EQ(free_["n1"], 2u);  // the pass's room is charged for it
  EXPECT_EQ(free_["n2"], 2u);
}

TEST_F(AttemptLauncherTest, NoRoomLeavesItPendingWithTheReasonOnce) {
  used_["n2"] = 4;  // n2 is full
  EXPECT_FALSE(Place());
  EXPECT_EQ(PhaseOf(job_.record.status), JobPhase::kPending);
  EXPECT_EQ(job_.record.status.reason(), "Unschedulable");
  EXPECT_THAT(job_.record.status.message(), HasSubstr("needs 2 nodes"));
  ASSERT_GT(job_.record.status.events_size(), 0);
  const auto& ev = job_.record.status.events(job_.record.status.events_size() - 1);
  EXPECT_EQ(ev.reason(), "Unschedulable");
  EXPECT_EQ(ev.message(), job_.record.status.message());
  EXPECT_FALSE(Place(kT0 + 1));  // the same reason: no second event
  EXPECT_THAT(owner_.triggers, ElementsAre(JobTrigger::kUnplaceable));
  EXPECT_TRUE(sink_.sent.empty());
  EXPECT_EQ(owner_.flushes, 0);
}

TEST_F(AttemptLauncherTest, ALayoutTheRuntimeRefusesFailsTheJob) {
  plugin_.refuse = true;
  EXPECT_FALSE(Place());
  EXPECT_EQ(PhaseOf(job_.record.status), JobPhase::kFailed);
  EXPECT_EQ(job_.record.status.reason(), "PlanRefused");
  EXPECT_TRUE(sink_.sent.empty());
  EXPECT_EQ(job_.record.status.attempt(), 0u);
  EXPECT_EQ(free_["n1"], 4u);
  EXPECT_EQ(free_["n2"], 4u);
}

TEST_F(AttemptLauncherTest, AnAttemptTheStoreRefusesIsUndoneAndNeverSent) {
  owner_.flush_status = IoError("disk full");
  const v1::JobStatus before = job_.record.status;
  EXPECT_FALSE(Place());
  EXPECT_EQ(job_.record.status.SerializeAsString(), before.SerializeAsString());
  EXPECT_TRUE(sink_.sent.empty());
  EXPECT_EQ(free_["n1"], 4u);  // nothing charged for an attempt that was not stored
  EXPECT_EQ(free_["n2"], 4u);
  EXPECT_EQ(owner_.dirty, 1);
  // Placed again once the store takes it.
  owner_.flush_status = Status::Ok();
  EXPECT_TRUE(Place(kT0 + 1));
  EXPECT_EQ(job_.record.status.attempt(), 1u);
}

TEST_F(AttemptLauncherTest, PlansGoOutOnceEveryNodeHoldsItsPorts) {
  plugin_.ports = {2, 1};
  ASSERT_TRUE(Place());
  EXPECT_THAT(ReserveNodes(), ElementsAre("n1", "n2"));
  EXPECT_TRUE(PlanNodes().empty());
  launcher_.OnPortsReserved("n2", Answer({7001}), &job_, kT0 + 1);
  EXPECT_TRUE(PlanNodes().empty());
  launcher_.OnPortsReserved("n1", Answer({6001, 6002}), &job_, kT0 + 2);
  ASSERT_THAT(PlanNodes(), ElementsAre("n1", "n2"));
  const auto& n1_plan = sink_.sent[sink_.sent.size() - 2].second.launch_plan();
  EXPECT_EQ(n1_plan.workers(0).env().at("NODE_PORTS"), "6001;6002;");
  EXPECT_TRUE(owner_.failed.empty());
  // A late duplicate is dropped: no second set of plans.
  launcher_.OnPortsReserved("n1", Answer({6001, 6002}), &job_, kT0 + 3);
  EXPECT_EQ(PlanNodes().size(), 2u);
}

TEST_F(AttemptLauncherTest, ANodeThatCannotReserveFailsTheAttempt) {
  plugin_.ports = {1, 1};
  ASSERT_TRUE(Place());
  launcher_.OnPortsReserved("n2", Answer({}, "no free port"), &job_, kT0 + 1);
  ASSERT_EQ(owner_.failed.size(), 1u);
  EXPECT_THAT(owner_.failed[0], HasSubstr("n2"));
  EXPECT_TRUE(PlanNodes().empty());
}

// Issue 18: a port error fails the replicated jobs of the refusing node's workers, so that a
// failure rule with targetReplicatedJobs fires for it (main named none: only untargeted rules).
TEST_F(AttemptLauncherTest, APortErrorNamesTheReplicatedJobsOfTheRefusingNodesWorkers) {
  plugin_.ports = {1, 1};
  ASSERT_TRUE(Place());
  auto& ranks = *job_.record.status.mutable_ranks();
  ranks[1].set_step("init");     // on n1, which reserved fine
  ranks[3].set_step("watcher");  // on n2
  launcher_.OnPortsReserved("n2", Answer({}, "no free port"), &job_, kT0 + 1);
  ASSERT_EQ(owner_.failed_jobs.size(), 1u);
  EXPECT_THAT(owner_.failed_jobs[0], ElementsAre("node", "watcher"));
}

TEST_F(AttemptLauncherTest, StoppingWhileReservingPortsEndsTheRanksThatNeverStarted) {
  plugin_.ports = {1, 0};
  ASSERT_TRUE(Place());
  const int dirty = owner_.dirty;
  launcher_.Stop(job_, "trainjob deleted");
  EXPECT_THAT(StopNodes(), ElementsAre("n1", "n2"));
  EXPECT_THAT(RankStates(), ElementsAre(v1::RANK_STATE_STOPPED, v1::RANK_STATE_STOPPED,
                                        v1::RANK_STATE_STOPPED, v1::RANK_STATE_STOPPED));
  EXPECT_EQ(owner_.dirty, dirty + 1);
  // The wait is over: the answer that comes late launches nothing.
  launcher_.OnPortsReserved("n1", Answer({6001}), &job_, kT0 + 1);
  EXPECT_TRUE(PlanNodes().empty());
}

TEST_F(AttemptLauncherTest, StoppingALaunchedAttemptStopsOnlyNodesWithLiveRanks) {
  ASSERT_TRUE(Place());
  for (auto& r : *job_.record.status.mutable_ranks()) {
    if (r.node() == "n1") ASSERT_TRUE(ApplyRankTrigger(r, RankTrigger::kNodeLost).ok());
  }
  launcher_.Stop(job_, "deadline exceeded");
  EXPECT_THAT(StopNodes(), ElementsAre("n2"));
  EXPECT_EQ(sink_.sent.back().second.stop_workers().reason(), "deadline exceeded");
}

TEST_F(AttemptLauncherTest, AStartTimeoutNamesTheSilentNodesAndGivesUpTheirRanks) {
  ASSERT_TRUE(Place());
  // n1's ranks report Started; n2's never do.
  for (auto& r : *job_.record.status.mutable_ranks()) {
    if (r.node() == "n1") ASSERT_TRUE(ApplyRankTrigger(r, RankTrigger::kStarted).ok());
  }
  launcher_.EnforceStartTimeout(job_, kT0 + kTimeout - 1);
  EXPECT_TRUE(owner_.failed.empty());
  launcher_.EnforceStartTimeout(job_, kT0 + kTimeout);
  ASSERT_EQ(owner_.failed.size(), 1u);
  EXPECT_THAT(owner_.failed[0], HasSubstr("StartTimeout"));
  EXPECT_THAT(owner_.failed[0], HasSubstr("n2 (no rank reported started)"));
  EXPECT_THAT(owner_.failed[0], ::testing::Not(HasSubstr("n1")));
  EXPECT_THAT(RankStates(), ElementsAre(v1::RANK_STATE_RUNNING, v1::RANK_STATE_RUNNING,
                                        v1::RANK_STATE_LOST, v1::RANK_STATE_LOST));
}

// Issue 18: a start timeout fails the replicated jobs of the workers that never started, so that
// `targetReplicatedJobs: [node]` fires for it and a rule on a step that did start does not.
TEST_F(AttemptLauncherTest, AStartTimeoutNamesTheReplicatedJobsOfTheWorkersThatNeverStarted) {
  ASSERT_TRUE(Place());
  auto& ranks = *job_.record.status.mutable_ranks();
  ranks[1].set_step("dataset-initializer");  // on n1: starts
  ranks[3].set_step("watcher");              // on n2: never starts
  for (auto& r : ranks) {
    if (r.node() == "n1") ASSERT_TRUE(ApplyRankTrigger(r, RankTrigger::kStarted).ok());
  }
  launcher_.EnforceStartTimeout(job_, kT0 + kTimeout);
  ASSERT_EQ(owner_.failed_jobs.size(), 1u);
  EXPECT_THAT(owner_.failed_jobs[0], ElementsAre("node", "watcher"));
}

TEST_F(AttemptLauncherTest, AStartTimeoutWhileWaitingForPortsNamesTheNodesThatNeverAnswered) {
  plugin_.ports = {1, 1};
  ASSERT_TRUE(Place());
  launcher_.OnPortsReserved("n1", Answer({6001}), &job_, kT0 + 1);
  launcher_.EnforceStartTimeout(job_, kT0 + kTimeout);
  ASSERT_EQ(owner_.failed.size(), 1u);
  EXPECT_THAT(owner_.failed[0], HasSubstr("n2 (its ports never arrived)"));
  EXPECT_THAT(owner_.failed[0], ::testing::Not(HasSubstr("n1")));
}

// The warning before a deadline goes to the nodes with live ranks and stops nothing (once per
// attempt is the controller's: JobStatus.deadline_warned_attempt); a stop carries its warning
// (issue 14).
TEST_F(AttemptLauncherTest, WarnGoesToLiveRanksAndStopsCarryTheirWarning) {
  ASSERT_TRUE(Place());
  for (auto& r : *job_.record.status.mutable_ranks()) {
    if (r.node() == "n1") ASSERT_TRUE(ApplyRankTrigger(r, RankTrigger::kNodeLost).ok());
  }
  EXPECT_TRUE(launcher_.Warn(job_, StopWarning{SIGUSR1, 5000}, "deadline near"));
  EXPECT_THAT(StopNodes(), ElementsAre("n2"));
  EXPECT_TRUE(sink_.sent.back().second.stop_workers().warn_only());
  EXPECT_FALSE(launcher_.Warn(job_, StopWarning{}, "no signal"));
  EXPECT_EQ(StopNodes().size(), 1u);

  launcher_.Stop(job_, "preempted", StopWarning{SIGUSR2, 7000});
  const v1::StopWorkers& stop = sink_.sent.back().second.stop_workers();
  EXPECT_FALSE(stop.warn_only());
  EXPECT_EQ(stop.warning_signal(), SIGUSR2);
  EXPECT_EQ(stop.warning_grace_ms(), 7000u);
}

TEST_F(AttemptLauncherTest, AForgottenJobWaitsForNothing) {
  plugin_.ports = {1, 1};
  ASSERT_TRUE(Place());
  launcher_.Forget("train");
  launcher_.OnPortsReserved("n1", Answer({6001}), &job_, kT0 + 1);
  launcher_.OnPortsReserved("n2", Answer({6002}), &job_, kT0 + 1);
  EXPECT_TRUE(PlanNodes().empty());
  EXPECT_TRUE(owner_.failed.empty());
}

}  // namespace
}  // namespace trainlet::coordinator
