// JobController over a real SQLite store, three registered nodes of 4 slots each, and a sink that
// records what would go to the agents. Time is passed in.
#include "coordinator/job_controller.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

#include "controller_fixture.h"
#include "coordinator/job_state_machine.h"
#include "tests/common/counting_sqlite_vfs.h"

namespace trainlet::coordinator {
namespace {

using testing::ControllerFixture;
using testing::Event;
using ::testing::HasSubstr;
using testing::JobYaml;
using testing::RuntimeYaml;

constexpr auto kStarted = v1::WorkerEvent::KIND_STARTED;
constexpr auto kExited = v1::WorkerEvent::KIND_EXITED;

class JobControllerTest : public ControllerFixture {};

// One job's whole life, apply to Succeeded, checked at every step: long on purpose, a reader
// follows the lifecycle top to bottom.
TEST_F(JobControllerTest, HelloRunsToCompletion) {
  v1::ApplyResult applied = ApplyOk(JobYaml("hello", 2, 2));
  ASSERT_EQ(applied.created_size(), 1);
  EXPECT_EQ(applied.created(0), "trainjob/hello");

  // Stored: a second connection to the database sees it.
  {
    auto other = JobStore::Open(state_dir_);
    ASSERT_TRUE(other.ok()) << other.status().ToString();
    auto rec = (*other)->GetJob("hello");
    ASSERT_TRUE(rec.ok()) << rec.status().ToString();
    ASSERT_TRUE(rec->has_value());
    EXPECT_EQ((*rec)->runtime_kind, "ClusterTrainingRuntime");
    EXPECT_EQ((*rec)->runtime_name, "plain");
    EXPECT_EQ(PhaseName((*rec)->status), "Starting");  // placement is written before plans go out
    EXPECT_EQ((*rec)->status.attempt(), 1u);
  }

  const v1::JobStatus& st = JobOrDie("hello");
  EXPECT_EQ(PhaseName(st), "Starting");
  EXPECT_EQ(st.attempt(), 1u);
  EXPECT_EQ(st.num_nodes(), 2u);
  EXPECT_EQ(st.procs_per_node(), 2u);
  EXPECT_EQ(st.plugin(), "plain");
  EXPECT_EQ(st.runtime(), "ClusterTrainingRuntime/plain");
  EXPECT_EQ(st.created_unix_ms(), kT0);
  ASSERT_EQ(st.placement_size(), 2);
  EXPECT_EQ(st.placement(0), "n1");  // best fit ties go by name
  EXPECT_EQ(st.placement(1), "n2");
  ASSERT_EQ(st.ranks_size(), 4);
  for (uint32_t r = 0; r < 4; ++r) {
    EXPECT_EQ(st.ranks(r).rank(), r);
    EXPECT_EQ(st.ranks(r).local_rank(), r % 2);
    EXPECT_EQ(st.ranks(r).node(), r < 2 ? "n1" : "n2");
    EXPECT_EQ(StateName(st.ranks(r)), "Pending");
    EXPECT_EQ(st.ranks(r).attempt(), 1u);
  }
  ASSERT_EQ(st.attempts_size(), 1);
  EXPECT_EQ(st.attempts(0).attempt(), 1u);
  EXPECT_EQ(ResultName(st.attempts(0)), "");
  // Where each rank of the attempt ran, so its logs stay reachable after a restart moves it.
  EXPECT_THAT(std::vector<std::string>(st.attempts(0).rank_nodes().begin(),
                                       st.attempts(0).rank_nodes().end()),
              ::testing::ElementsAre("n1", "n1", "n2", "n2"));

  auto plans = sink_.Plans();
  ASSERT_EQ(plans.size(), 2u);
  EXPECT_TRUE(sink_.Stops().empty());
  std::set<uint32_t> seen_ranks;
  for (size_t i = 0; i < plans.size(); ++i) {
    const auto& [node, plan] = plans[i];
    EXPECT_EQ(node, i == 0 ? "n1" : "n2");
    EXPECT_EQ(plan.job(), "hello");
    EXPECT_EQ(plan.attempt(), 1u);
    EXPECT_EQ(plan.node_rank(), i);
    EXPECT_EQ(plan.stop_grace_ms(), options_.stop_grace_ms);
    ASSERT_EQ(plan.workers_size(), 2);
    for (int l = 0; l < 2; ++l) {
      const v1::WorkerSpec& w = plan.workers(l);
      const uint32_t rank = static_cast<uint32_t>(i * 2 + l);
      seen_ranks.insert(w.rank());
      EXPECT_EQ(w.rank(), rank);
      EXPECT_EQ(w.local_rank(), static_cast<uint32_t>(l));
      ASSERT_EQ(w.argv_size(), 3);
      EXPECT_EQ(w.argv(0), "/bin/sh");
      EXPECT_EQ(w.argv(2), "echo hello $TRAINLET_RANK");
      const auto& env = w.env();
      EXPECT_EQ(env.at("TRAINLET_RANK"), std::to_string(rank));
      EXPECT_EQ(env.at("TRAINLET_WORLD_SIZE"), "4");
      EXPECT_EQ(env.at("TRAINLET_NODE_RANK"), std::to_string(i));
      EXPECT_EQ(env.at("TRAINLET_LOCAL_RANK"), std::to_string(l));
      EXPECT_EQ(env.at("TRAINLET_JOB"), "hello");
      EXPECT_EQ(env.at("TRAINLET_ATTEMPT"), "1");
    }
  }
  EXPECT_EQ(seen_ranks, (std::set<uint32_t>{0, 1, 2, 3}));

  // Three of four started: still Starting.
  for (uint32_t r = 0; r < 3; ++r) Report("hello", r, kStarted, kT0 + 100);
  EXPECT_EQ(PhaseName(JobOrDie("hello")), "Starting");
  EXPECT_EQ(StateName(*Rank(JobOrDie("hello"), 0)), "Running");
  EXPECT_EQ(Rank(JobOrDie("hello"), 0)->pid(), 1000);
  Report("hello", 3, kStarted, kT0 + 110);
  EXPECT_EQ(PhaseName(JobOrDie("hello")), "Running");

  ReportAll("hello", kExited, kT0 + 2000, 0);
  const v1::JobStatus& done = JobOrDie("hello");
  EXPECT_EQ(PhaseName(done), "Succeeded");
  const v1::Condition* complete = Cond(done, "Complete");
  ASSERT_NE(complete, nullptr);
  EXPECT_EQ(complete->status(), "True");
  EXPECT_EQ(Cond(done, "Failed"), nullptr);
  EXPECT_EQ(ResultName(done.attempts(0)), "Succeeded");
  EXPECT_EQ(done.attempts(0).ended_unix_ms(), kT0 + 2000);
  for (const auto& r : done.ranks()) EXPECT_EQ(StateName(r), "Succeeded");
  EXPECT_TRUE(sink_.Stops().empty());

  // Event changes reach the store on Flush.
  ASSERT_TRUE(controller_->Flush().ok());
  auto rec = Stored("hello");
  ASSERT_TRUE(rec.has_value());
  EXPECT_EQ(PhaseName(rec->status), "Succeeded");
}

// Issue 16 (group commit): an apply whose job is placed in the same pass waits for one sync of
// the store's WAL, not two (one for the apply, one for the placement; AttemptLauncher::Place sends
// the plan after that commit); an apply whose job cannot be placed is synced before Apply
// returns.
TEST_F(JobControllerTest, ApplyAndPlacementShareOneSyncBeforeThePlanGoesOut) {
  trainlet::testing::CountingSqliteVfs vfs;
  controller_.reset();
  store_.reset();
  auto store = JobStore::Open(state_dir_);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  store_ = std::move(store).value();
  MakeController();
  ApplyOk(JobYaml("warm", 1, 1));  // the WAL exists from here on
  int before = vfs.wal_syncs();
  ApplyOk(JobYaml("placed", 1, 1));
  EXPECT_EQ(PhaseName(JobOrDie("placed")), "Starting");
  EXPECT_EQ(vfs.wal_syncs(), before + 1);
  bool sent = false;
  for (const auto& [node, plan] : sink_.Plans()) sent = sent || plan.job() == "placed";
  EXPECT_TRUE(sent);

  before = vfs.wal_syncs();
  ApplyOk(JobYaml("too-big", 3, 100));  // no node has 100 slots: stored, not placed
  EXPECT_EQ(PhaseName(JobOrDie("too-big")), "Pending");
  EXPECT_EQ(vfs.wal_syncs(), before + 1);
  auto other = JobStore::Open(state_dir_);
  ASSERT_TRUE(other.ok());
  for (const char* name : {"placed", "too-big"}) {
    auto rec = (*other)->GetJob(name);
    ASSERT_TRUE(rec.ok() && rec->has_value()) << name;
  }
  EXPECT_EQ(PhaseName((*(*other)->GetJob("placed"))->status), "Starting");
  controller_.reset();  // the store's files go through `vfs`: closed before it goes
  store_.reset();
}

TEST_F(JobControllerTest, GenerationMovesOnChanges) {
  const uint64_t g0 = controller_->generation();
  ApplyOk(JobYaml("hello", 2, 2));
  const uint64_t g1 = controller_->generation();
  EXPECT_GT(g1, g0);
  Report("hello", 0, kStarted, kT0 + 1);
  EXPECT_GT(controller_->generation(), g1);
}

TEST_F(JobControllerTest, RankFailureFailsJobWithoutRestarts) {
  ApplyOk(JobYaml("hello", 2, 2));
  ReportAll("hello", kStarted, kT0 + 10);
  ASSERT_EQ(PhaseName(JobOrDie("hello")), "Running");
  sink_.sent.clear();

  // Rank 2 (on n2) finished cleanly; rank 3 (also on n2) fails. Only n1 still runs ranks.
  Report("hello", 2, kExited, kT0 + 500, 0);
  EXPECT_EQ(PhaseName(JobOrDie("hello")), "Running");
  Report("hello", 3, kExited, kT0 + 600, 3);

  const v1::JobStatus& st = JobOrDie("hello");
  EXPECT_EQ(PhaseName(st), "Failed");
  EXPECT_EQ(st.reason(), "BackoffLimitExceeded");
  const v1::Condition* failed = Cond(st, "Failed");
  ASSERT_NE(failed, nullptr);
  EXPECT_EQ(failed->status(), "True");
  EXPECT_EQ(Cond(st, "Complete"), nullptr);

  const v1::RankStatus* r3 = Rank(st, 3);
  ASSERT_NE(r3, nullptr);
  EXPECT_EQ(r3->exit_code(), 3);
  EXPECT_EQ(StateName(*r3), "Failed");
  EXPECT_EQ(StateName(*Rank(st, 2)), "Succeeded");

  ASSERT_EQ(st.attempts_size(), 1);
  EXPECT_EQ(ResultName(st.attempts(0)), "Failed");
  EXPECT_EQ(st.attempts(0).ended_unix_ms(), kT0 + 600);
  EXPECT_THAT(st.attempts(0).cause(), HasSubstr("rank 3"));
  EXPECT_THAT(st.attempts(0).cause(), HasSubstr("code 3"));

  EXPECT_EQ(sink_.StopNodes(), std::vector<std::string>{"n1"});
  for (const auto& [node, stop] : sink_.Stops()) {
    EXPECT_EQ(stop.job(), "hello");
    EXPECT_EQ(stop.attempt(), 1u);
  }
  EXPECT_TRUE(sink_.Plans().empty());

  // The stopped ranks' exits change nothing more, and a Failed job is never placed again.
  sink_.sent.clear();
  Report("hello", 0, kExited, kT0 + 700, 0, 15);
  Report("hello", 1, kExited, kT0 + 700, 0, 15);
  controller_->Schedule(kT0 + 100000);
  EXPECT_EQ(PhaseName(JobOrDie("hello")), "Failed");
  EXPECT_EQ(JobOrDie("hello").attempt(), 1u);
  EXPECT_TRUE(sink_.sent.empty());
  EXPECT_EQ(Rank(JobOrDie("hello"), 0)->signal(), 15);

  ASSERT_TRUE(controller_->Flush().ok());
  EXPECT_EQ(PhaseName(Stored("hello")->status), "Failed");
}

TEST_F(JobControllerTest, KilledBySignalCause) {
  ApplyOk(JobYaml("hello", 1, 1));
  Report("hello", 0, kStarted, kT0 + 1);
  Report("hello", 0, kExited, kT0 + 2, 0, 9);
  const v1::JobStatus& st = JobOrDie("hello");
  EXPECT_EQ(PhaseName(st), "Failed");
  EXPECT_THAT(st.attempts(0).cause(), HasSubstr("signal 9"));
}

TEST_F(JobControllerTest, StartFailedFailsAttempt) {
  ApplyOk(JobYaml("hello", 1, 2));
  controller_->OnWorkerEvent(
      "n1",
      [] {
        auto ev = Event("hello", 1, 1, v1::WorkerEvent::KIND_START_FAILED);
        ev.set_message("execve: No such file or directory");
        return ev;
      }(),
      kT0 + 5);
  const v1::JobStatus& st = JobOrDie("hello");
  EXPECT_EQ(PhaseName(st), "Failed");
  EXPECT_EQ(StateName(*Rank(st, 1)), "StartFailed");
  EXPECT_THAT(st.attempts(0).cause(), HasSubstr("No such file"));
  // Rank 0 had not reported, so it may be alive on n1: it is stopped.
  EXPECT_EQ(sink_.StopNodes(), std::vector<std::string>{"n1"});
}

// A failure, the backoff, and the restart as a new attempt, in order: one scenario, one test.
TEST_F(JobControllerTest, RestartAfterFailureWithBackoff) {
  options_.restart_backoff = std::chrono::milliseconds(10);
  MakeController();
  ApplyOk(RuntimeYaml("plain-retry", "", 1) + "---\n" + JobYaml("retry", 2, 2, "plain-retry"));
  ASSERT_EQ(JobOrDie("retry").max_restarts(), 1u);
  ASSERT_EQ(PhaseName(JobOrDie("retry")), "Starting");
  ReportAll("retry", kStarted, kT0 + 10);
  ASSERT_EQ(PhaseName(JobOrDie("retry")), "Running");
  sink_.sent.clear();

  // Attempt 1 fails at t=1000.
  const int64_t fail_at = kT0 + 1000;
  Report("retry", 1, kExited, fail_at, 3);
  {
    const v1::JobStatus& st = JobOrDie("retry");
    EXPECT_EQ(PhaseName(st), "Restarting");
    EXPECT_EQ(st.attempt(), 1u);
    EXPECT_EQ(ResultName(st.attempts(0)), "Failed");
    EXPECT_THAT(st.attempts(0).cause(), HasSubstr("rank 1"));
    EXPECT_EQ(Cond(st, "Failed"), nullptr);
  }
  EXPECT_EQ(sink_.StopNodes(), (std::vector<std::string>{"n1", "n2"}));
  // Old ranks still run: the restart waits for their exit events, not for a time.
  EXPECT_EQ(controller_->NextWakeMs(), INT64_MAX);
  sink_.sent.clear();

  // Neither the backoff nor the old ranks are over.
  controller_->Schedule(fail_at + 1);
  EXPECT_TRUE(sink_.Plans().empty());
  EXPECT_EQ(PhaseName(JobOrDie("retry")), "Restarting");

  // More failures of the same attempt while it stops do not fail it again.
  Report("retry", 0, kExited, fail_at + 2, 0, 15);
  Report("retry", 2, kExited, fail_at + 3, 0, 15);
  Report("retry", 3, kExited, fail_at + 4, 0, 15);
  EXPECT_EQ(PhaseName(JobOrDie("retry")), "Restarting");
  EXPECT_EQ(JobOrDie("retry").attempts_size(), 1);
  EXPECT_THAT(JobOrDie("retry").attempts(0).cause(), HasSubstr("rank 1"));

  // All old ranks exited: only the backoff is left, and it is timed work.
  EXPECT_EQ(controller_->NextWakeMs(), fail_at + 10);
  controller_->Schedule(fail_at + 5);
  EXPECT_TRUE(sink_.Plans().empty());
  EXPECT_EQ(PhaseName(JobOrDie("retry")), "Restarting");
  controller_->Schedule(fail_at + 10);
  {
    const v1::JobStatus& st = JobOrDie("retry");
    EXPECT_EQ(PhaseName(st), "Starting");
    EXPECT_EQ(st.attempt(), 2u);
    ASSERT_EQ(st.attempts_size(), 2);
    EXPECT_EQ(st.attempts(1).attempt(), 2u);
    ASSERT_EQ(st.ranks_size(), 4);
    for (const auto& r : st.ranks()) {
      EXPECT_EQ(StateName(r), "Pending");
      EXPECT_EQ(r.attempt(), 2u);
    }
  }
  auto plans = sink_.Plans();
  ASSERT_EQ(plans.size(), 2u);
  for (const auto& [node, plan] : plans) {
    EXPECT_EQ(plan.attempt(), 2u);
    for (const auto& w : plan.workers()) EXPECT_EQ(w.env().at("TRAINLET_ATTEMPT"), "2");
  }
  // Starting: the start timeout is the only timed work left.
  EXPECT_EQ(controller_->NextWakeMs(), fail_at + 10 + options_.start_timeout.count());
  sink_.sent.clear();

  // Stale events for attempt 1: an exit is ignored; a start is answered with a stop.
  controller_->OnWorkerEvent("n1", Event("retry", 1, 0, kExited, 7), fail_at + 20);
  EXPECT_EQ(StateName(*Rank(JobOrDie("retry"), 0)), "Pending");
  EXPECT_EQ(Rank(JobOrDie("retry"), 0)->exit_code(), 0);
  EXPECT_EQ(PhaseName(JobOrDie("retry")), "Starting");
  EXPECT_TRUE(sink_.sent.empty());
  controller_->OnWorkerEvent("n2", Event("retry", 1, 2, kStarted), fail_at + 21);
  EXPECT_EQ(StateName(*Rank(JobOrDie("retry"), 2)), "Pending");
  auto stops = sink_.Stops();
  ASSERT_EQ(stops.size(), 1u);
  EXPECT_EQ(stops[0].first, "n2");
  EXPECT_EQ(stops[0].second.job(), "retry");
  EXPECT_EQ(stops[0].second.attempt(), 1u);
  EXPECT_TRUE(sink_.Plans().empty());

  // Attempt 2 fails too: the restart limit (1) is reached.
  ReportAll("retry", kStarted, fail_at + 30);
  ASSERT_EQ(PhaseName(JobOrDie("retry")), "Running");
  Report("retry", 0, kExited, fail_at + 40, 1);
  const v1::JobStatus& st = JobOrDie("retry");
  EXPECT_EQ(PhaseName(st), "Failed");
  EXPECT_EQ(ResultName(st.attempts(1)), "Failed");
  ASSERT_NE(Cond(st, "Failed"), nullptr);
  EXPECT_THAT(Cond(st, "Failed")->message(), HasSubstr("restart limit 1"));
}

TEST_F(JobControllerTest, UnplaceableWaitsUntilNodesJoin) {
  ApplyOk(JobYaml("big", 5, 2));
  {
    const v1::JobStatus& st = JobOrDie("big");
    EXPECT_EQ(PhaseName(st), "Pending");
    EXPECT_EQ(st.attempt(), 0u);
    EXPECT_EQ(st.reason(), "Unschedulable");
    EXPECT_THAT(st.message(), HasSubstr("5 nodes"));
    EXPECT_THAT(st.message(), HasSubstr("3 nodes"));
    EXPECT_EQ(st.ranks_size(), 0);
  }
  EXPECT_TRUE(sink_.sent.empty());
  controller_->Schedule(kT0 + 1000);
  EXPECT_TRUE(sink_.sent.empty());
  EXPECT_EQ(PhaseName(JobOrDie("big")), "Pending");

  AddNode("n4");
  AddNode("n5");
  controller_->Schedule(kT0 + 2000);
  const v1::JobStatus& st = JobOrDie("big");
  EXPECT_EQ(PhaseName(st), "Starting");
  EXPECT_EQ(st.placement_size(), 5);
  EXPECT_EQ(st.ranks_size(), 10);
  EXPECT_EQ(sink_.Plans().size(), 5u);
}

TEST_F(JobControllerTest, BusyNodesAreNotDoubleBooked) {
  // Two 3-node jobs of 4 ranks each: the second must wait for the first.
  ApplyOk(JobYaml("first", 3, 4));
  ASSERT_EQ(PhaseName(JobOrDie("first")), "Starting");
  ApplyOk(JobYaml("second", 3, 4));
  EXPECT_EQ(PhaseName(JobOrDie("second")), "Pending");
  EXPECT_EQ(sink_.Plans().size(), 3u);
  ReportAll("first", kStarted, kT0 + 1);
  ReportAll("first", kExited, kT0 + 2);
  ASSERT_EQ(PhaseName(JobOrDie("first")), "Succeeded");
  controller_->Schedule(kT0 + 3);
  EXPECT_EQ(PhaseName(JobOrDie("second")), "Starting");
  EXPECT_EQ(sink_.Plans().size(), 6u);
}

TEST_F(JobControllerTest, BadApplyStoresNothing) {
  ApplyOk(JobYaml("hello", 1, 1));
  const auto before = StoredNames();
  ASSERT_EQ(before, std::vector<std::string>{"hello"});

  // Malformed YAML: the error names the source.
  auto r = controller_->Apply("kind: [unclosed\n", "bad.yaml", kT0);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kInvalid);
  EXPECT_THAT(r.status().message(), HasSubstr("bad.yaml"));

  // Unknown runtime, even with a good job and a good runtime beside it in the file.
  r = controller_->Apply(RuntimeYaml("extra") + "---\n" + JobYaml("ok", 1, 1, "extra") + "---\n" +
                             JobYaml("lost", 1, 1, "no-such-runtime"),
                         "two.yaml", kT0);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kNotFound);
  EXPECT_THAT(r.status().message(), HasSubstr("no-such-runtime"));
  EXPECT_THAT(r.status().message(), HasSubstr("spec.runtimeRef"));
  EXPECT_EQ(controller_->Find("ok"), nullptr);
  EXPECT_EQ(controller_->Find("lost"), nullptr);
  auto rts = store_->GetRuntime("ClusterTrainingRuntime", "extra");
  ASSERT_TRUE(rts.ok());
  EXPECT_FALSE(rts->has_value()) << "runtime of a refused file was stored";

  // Same name, different spec.
  r = controller_->Apply(JobYaml("hello", 1, 1, "plain", "changed"), "changed.yaml", kT0);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kExists);
  EXPECT_THAT(r.status().message(), HasSubstr("trainjob/hello"));
  EXPECT_THAT(r.status().message(), HasSubstr("(spec.trainer.command[2] differs)"));
  r = controller_->Apply(JobYaml("hello", 2, 1), "nodes.yaml", kT0);
  EXPECT_THAT(r.status().message(), HasSubstr("(spec.trainer.numNodes differs)"));
  std::string labelled = JobYaml("hello", 1, 1);
  labelled.insert(labelled.find("spec:"), "  labels:\n    team: a\n");
  r = controller_->Apply(labelled, "labels.yaml", kT0);
  EXPECT_THAT(r.status().message(), HasSubstr("(metadata.labels differs)"));

  // An invalid field: the error names it.
  r = controller_->Apply(JobYaml("zero", 0, 1), "zero.yaml", kT0);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("numNodes"));

  EXPECT_EQ(StoredNames(), before);
  EXPECT_EQ(controller_->List().size(), 1u);
  EXPECT_TRUE(sink_.Plans().size() == 1u);  // only hello's, from the first apply

  // The same spec again: unchanged, nothing new.
  v1::ApplyResult again = ApplyOk(JobYaml("hello", 1, 1));
  EXPECT_EQ(again.created_size(), 0);
  ASSERT_EQ(again.unchanged_size(), 1);
  EXPECT_EQ(again.unchanged(0), "trainjob/hello");
  EXPECT_EQ(StoredNames(), before);
  EXPECT_EQ(JobOrDie("hello").attempt(), 1u);
}

TEST_F(JobControllerTest, DuplicateNamesInOneFileStoreNothing) {
  auto r = controller_->Apply(JobYaml("twin", 1, 1) + "---\n" + JobYaml("twin", 1, 2), "twins.yaml",
                              kT0);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("twin"));
  EXPECT_TRUE(StoredNames().empty());
  EXPECT_EQ(controller_->Find("twin"), nullptr);
  EXPECT_TRUE(sink_.sent.empty());
}

// A Failed job's ranks keep running until their stop takes effect (up to stop_grace_ms), so
// their slots are still taken: a new gang must not be placed on them meanwhile (get nodes counts
// them as used too).
TEST_F(JobControllerTest, StoppingRanksOfFailedJobStillHoldSlots) {
  ApplyOk(JobYaml("first", 3, 4));  // fills the cluster
  ReportAll("first", kStarted, kT0 + 1);
  Report("first", 0, kExited, kT0 + 2, 1);
  ASSERT_EQ(PhaseName(JobOrDie("first")), "Failed");
  ASSERT_EQ(StateName(*Rank(JobOrDie("first"), 1)), "Running");  // asked to stop, not gone yet
  sink_.sent.clear();

  ApplyOk(JobYaml("second", 3, 4), kT0 + 3);
  EXPECT_EQ(PhaseName(JobOrDie("second")), "Pending");
  EXPECT_TRUE(sink_.Plans().empty());

  // Once the old ranks are gone, the new gang fits.
  ReportAll("first", kExited, kT0 + 4, 0, 15);
  controller_->Schedule(kT0 + 5);
  EXPECT_EQ(PhaseName(JobOrDie("second")), "Starting");
}

// NextWakeMs promises the time of the next *timed* work. A Restarting job whose backoff ended but
// whose old ranks still run waits for their exit events, not for time; a past backoff end there
// would make the coordinator's loop poll with a 1 ms timeout until the old ranks exit.
TEST_F(JobControllerTest, NextWakeIgnoresRestartsWaitingForOldRanks) {
  options_.restart_backoff = std::chrono::milliseconds(10);
  MakeController();
  ApplyOk(RuntimeYaml("plain-retry", "", 1) + "---\n" + JobYaml("retry", 2, 2, "plain-retry"));
  ReportAll("retry", kStarted, kT0 + 1);
  Report("retry", 0, kExited, kT0 + 100, 1);
  ASSERT_EQ(PhaseName(JobOrDie("retry")), "Restarting");
  sink_.sent.clear();
  controller_->Schedule(kT0 + 200);  // backoff over; ranks 1-3 still stopping
  // Two attempts never run at once.
  ASSERT_EQ(PhaseName(JobOrDie("retry")), "Restarting");
  EXPECT_TRUE(sink_.Plans().empty());
  EXPECT_GT(controller_->NextWakeMs(), kT0 + 200);
}

TEST_F(JobControllerTest, ApplyReportsRuntimesCreatedThenConfigured) {
  v1::ApplyResult first = ApplyOk(RuntimeYaml("mine"));
  ASSERT_EQ(first.created_size(), 1);
  EXPECT_THAT(first.created(0), HasSubstr("mine"));
  v1::ApplyResult second = ApplyOk(RuntimeYaml("mine"));
  EXPECT_EQ(second.created_size(), 0);
  EXPECT_EQ(second.configured_size(), 1);
  auto rt = store_->GetRuntime("ClusterTrainingRuntime", "mine");
  ASSERT_TRUE(rt.ok());
  EXPECT_TRUE(rt->has_value());
}

TEST_F(JobControllerTest, MissingPluginStoredButNeverPlaced) {
  ApplyOk(RuntimeYaml("fluxy", "    flux: {}\n") + "---\n" + JobYaml("t", 1, 1, "fluxy"));
  const v1::JobStatus& st = JobOrDie("t");
  EXPECT_EQ(PhaseName(st), "Pending");
  EXPECT_EQ(st.plugin(), "flux");
  EXPECT_THAT(st.reason(), HasSubstr("'flux'"));
  EXPECT_THAT(st.reason(), HasSubstr("plugin"));
  EXPECT_EQ(StoredNames(), std::vector<std::string>{"t"});
  controller_->Schedule(kT0 + 1000);
  controller_->Schedule(kT0 + 100000);
  EXPECT_TRUE(sink_.sent.empty());
  EXPECT_EQ(PhaseName(JobOrDie("t")), "Pending");
  EXPECT_EQ(JobOrDie("t").attempt(), 0u);
  EXPECT_THAT(JobOrDie("t").reason(), HasSubstr("'flux'"));  // not replaced by another reason
}

TEST_F(JobControllerTest, DeleteRunningJobWaitsForRanks) {
  ApplyOk(JobYaml("hello", 2, 2));
  ReportAll("hello", kStarted, kT0 + 1);
  sink_.sent.clear();

  auto del = controller_->Delete("hello", kT0 + 100);
  ASSERT_TRUE(del.ok()) << del.status().ToString();
  EXPECT_EQ(del->name(), "hello");
  EXPECT_EQ(sink_.StopNodes(), (std::vector<std::string>{"n1", "n2"}));
  for (const auto& [node, stop] : sink_.Stops()) {
    EXPECT_EQ(stop.job(), "hello");
    EXPECT_EQ(stop.attempt(), 1u);
  }
  ASSERT_NE(controller_->Find("hello"), nullptr);
  EXPECT_TRUE(JobOrDie("hello").deleting());
  ASSERT_TRUE(Stored("hello").has_value());
  EXPECT_TRUE(Stored("hello")->status.deleting());  // written before it is acknowledged

  // A second delete is accepted and sends nothing new.
  sink_.sent.clear();
  ASSERT_TRUE(controller_->Delete("hello", kT0 + 101).ok());
  EXPECT_TRUE(sink_.sent.empty());

  // The ranks' exits (killed) do not fail a job being deleted.
  Report("hello", 0, kExited, kT0 + 200, 0, 15);
  Report("hello", 1, kExited, kT0 + 200, 0, 15);
  Report("hello", 2, kExited, kT0 + 200, 0, 15);
  ASSERT_NE(controller_->Find("hello"), nullptr);
  EXPECT_NE(PhaseName(JobOrDie("hello")), "Failed");
  EXPECT_TRUE(Stored("hello").has_value());
  Report("hello", 3, kExited, kT0 + 210, 0, 15);
  EXPECT_EQ(controller_->Find("hello"), nullptr);
  EXPECT_TRUE(controller_->List().empty());
  EXPECT_TRUE(StoredNames().empty());
  ASSERT_TRUE(controller_->Flush().ok());
  EXPECT_TRUE(StoredNames().empty());

  // A late start from the deleted job is told to stop.
  sink_.sent.clear();
  controller_->OnWorkerEvent("n1", Event("hello", 1, 0, kStarted), kT0 + 300);
  ASSERT_EQ(sink_.Stops().size(), 1u);
  EXPECT_EQ(sink_.Stops()[0].first, "n1");

  // The name is free again.
  v1::ApplyResult again = ApplyOk(JobYaml("hello", 2, 2));
  EXPECT_EQ(again.created_size(), 1);
}

TEST_F(JobControllerTest, DeletePendingJobRemovesAtOnce) {
  ApplyOk(JobYaml("big", 5, 1));
  ASSERT_EQ(PhaseName(JobOrDie("big")), "Pending");
  auto del = controller_->Delete("big", kT0 + 1);
  ASSERT_TRUE(del.ok()) << del.status().ToString();
  EXPECT_EQ(controller_->Find("big"), nullptr);
  EXPECT_TRUE(StoredNames().empty());
  EXPECT_TRUE(sink_.sent.empty());

  auto missing = controller_->Delete("big", kT0 + 2);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), ErrorCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("big"));
}

TEST_F(JobControllerTest, DeleteWhileNodeLostFinishes) {
  ApplyOk(JobYaml("hello", 2, 2));
  ReportAll("hello", kStarted, kT0 + 1);
  ASSERT_TRUE(controller_->Delete("hello", kT0 + 2).ok());
  Report("hello", 0, kExited, kT0 + 3, 0, 15);
  Report("hello", 1, kExited, kT0 + 3, 0, 15);
  ASSERT_NE(controller_->Find("hello"), nullptr);
  // n2 never answers: losing it ends its ranks, and the delete completes.
  controller_->OnNodeLost("n2", kT0 + 5000);
  EXPECT_EQ(controller_->Find("hello"), nullptr);
  EXPECT_TRUE(StoredNames().empty());
}

TEST_F(JobControllerTest, NodeLostFailsAttempt) {
  ApplyOk(JobYaml("hello", 2, 2));
  ApplyOk(JobYaml("other", 1, 1));  // best fit: beside hello's ranks on n1
  ASSERT_EQ(JobOrDie("other").ranks(0).node(), "n1");
  ReportAll("hello", kStarted, kT0 + 1);
  ReportAll("other", kStarted, kT0 + 1);
  sink_.sent.clear();

  controller_->OnNodeLost("n2", kT0 + 4000);
  const v1::JobStatus& st = JobOrDie("hello");
  // A lost node is the infrastructure's failure, not the job's (issue 19, defect 4): the attempt
  // restarts without counting against maxRestarts 0 (before, the job failed here).
  EXPECT_EQ(PhaseName(st), "Restarting");
  EXPECT_TRUE(st.attempts(0).infrastructure());
  EXPECT_EQ(st.infrastructure_retries(), 1u);
  EXPECT_THAT(st.attempts(0).cause(), HasSubstr("n2"));
  EXPECT_THAT(st.attempts(0).cause(), HasSubstr("lost"));
  EXPECT_EQ(StateName(*Rank(st, 2)), "Lost");
  EXPECT_EQ(StateName(*Rank(st, 3)), "Lost");
  EXPECT_EQ(StateName(*Rank(st, 0)), "Running");
  // Stop goes to the nodes still holding live ranks, not to the lost one.
  EXPECT_EQ(sink_.StopNodes(), std::vector<std::string>{"n1"});
  // A job with no rank on n2 is untouched.
  EXPECT_EQ(PhaseName(JobOrDie("other")), "Running");
}

// The hold on a lost node's job is stored with it (issue 14, redteam): a coordinator restarted
// within it used to forget it and place the next attempt at once, while the silent node could
// still run the old ranks, so two attempts of the job ran at once.
TEST_F(JobControllerTest, ALostNodesHoldOutlivesARestart) {
  ApplyOk(JobYaml("hello", 2, 2));
  ReportAll("hello", kStarted, kT0 + 1);
  const int64_t hold = kT0 + 20000;  // last heard + partition grace + stop grace + margin
  controller_->OnNodeLost("n2", kT0 + 4000, hold);
  ASSERT_EQ(PhaseName(JobOrDie("hello")), "Restarting");
  ASSERT_TRUE(controller_->Flush().ok());
  MakeController();  // the restart
  EXPECT_EQ(JobOrDie("hello").lost_node_hold_unix_ms(), hold);
  // Attempt 1's ranks on n1 end (the stop the failure sent); n2's are Lost.
  for (uint32_t rank : {0u, 1u}) Report("hello", rank, kExited, kT0 + 4500, 0, SIGTERM);
  controller_->Schedule(kT0 + 5000);
  controller_->Schedule(hold - 1);
  EXPECT_EQ(JobOrDie("hello").attempt(), 1u) << "placed while the lost node may run attempt 1";
  controller_->Schedule(hold + 1);
  EXPECT_EQ(JobOrDie("hello").attempt(), 2u);
}

// Infrastructure failures are retried without counting, but not in a tight loop: past
// max_infrastructure_retries in a row each restart waits the longest backoff, with a reason
// that says why (issue 19, defect 4).
TEST_F(JobControllerTest, InfrastructureRetriesAreBounded) {
  options_.max_infrastructure_retries = 1;
  options_.restart_backoff = std::chrono::milliseconds(100);
  options_.max_restart_backoff = std::chrono::milliseconds(60000);
  MakeController();
  ApplyOk(JobYaml("hello", 1, 1));
  int64_t now = kT0;
  for (uint32_t round = 1; round <= 2; ++round) {
    const v1::JobStatus& st = JobOrDie("hello");
    ASSERT_EQ(st.attempt(), round);
    const std::string node = st.ranks(0).node();
    controller_->OnNodeLost(node, now += 10);
    ASSERT_EQ(PhaseName(JobOrDie("hello")), "Restarting");
    EXPECT_TRUE(JobOrDie("hello").attempts(round - 1).infrastructure());
    EXPECT_EQ(JobOrDie("hello").infrastructure_retries(), round);
    if (round == 1) {
      EXPECT_EQ(JobOrDie("hello").reason(), "AttemptFailed");
      controller_->Schedule(now += 100);  // the first backoff
    }
  }
  EXPECT_EQ(JobOrDie("hello").reason(), "WaitingForInfrastructure");
  controller_->Schedule(now + 59000);
  EXPECT_EQ(JobOrDie("hello").attempt(), 2u) << "placed before the longest backoff";
  controller_->Schedule(now + 60000);
  EXPECT_EQ(JobOrDie("hello").attempt(), 3u);
  ReportAll("hello", kStarted, now + 60001);
  EXPECT_EQ(JobOrDie("hello").infrastructure_retries(), 0u);  // delivered: the count starts over
}

TEST_F(JobControllerTest, LoadSeesStoredJobsAndPhases) {
  ApplyOk(JobYaml("hello", 2, 2));
  ApplyOk(JobYaml("big", 5, 1));
  ApplyOk(RuntimeYaml("fluxy", "    flux: {}\n") + "---\n" + JobYaml("t", 1, 1, "fluxy"));
  ReportAll("hello", kStarted, kT0 + 1);
  ReportAll("hello", kExited, kT0 + 2);
  ASSERT_EQ(PhaseName(JobOrDie("hello")), "Succeeded");
  ASSERT_TRUE(controller_->Flush().ok());

  // A second controller over a second connection to the same database.
  auto store2 = JobStore::Open(state_dir_);
  ASSERT_TRUE(store2.ok());
  testing::RecordingSink sink2;
  JobController second(store2->get(), &registry_, &sink2, options_);
  ASSERT_TRUE(second.Load("").ok());
  auto list = second.List();
  ASSERT_EQ(list.size(), 3u);
  EXPECT_EQ(list[0]->name(), "hello");
  EXPECT_EQ(list[1]->name(), "big");
  EXPECT_EQ(list[2]->name(), "t");
  EXPECT_EQ(PhaseName(*second.Find("hello")), "Succeeded");
  EXPECT_EQ(second.Find("hello")->ranks_size(), 4);
  ASSERT_NE(Cond(*second.Find("hello"), "Complete"), nullptr);
  EXPECT_EQ(PhaseName(*second.Find("big")), "Pending");
  EXPECT_EQ(PhaseName(*second.Find("t")), "Pending");
  EXPECT_THAT(second.Find("t")->reason(), HasSubstr("'flux'"));

  // The reloaded jobs are live: the same spec is "unchanged", and the Pending one is placed
  // once there is room.
  auto again = second.Apply(JobYaml("hello", 2, 2), "again.yaml", kT0 + 10);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->unchanged_size(), 1);
  AddNode("n4");
  AddNode("n5");
  second.Schedule(kT0 + 20);
  EXPECT_EQ(PhaseName(*second.Find("big")), "Starting");
  EXPECT_EQ(sink2.Plans().size(), 5u);
}

TEST_F(JobControllerTest, LoadRefusesBadRuntimesDir) {
  JobController other(store_.get(), &registry_, &sink_, options_);
  Status s = other.Load(root_ + "/does-not-exist");
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("does-not-exist"));
}

TEST_F(JobControllerTest, EventsFromTheWrongNodeAreIgnored) {
  ApplyOk(JobYaml("hello", 2, 2));
  // Rank 0 lives on n1; n3 claims it.
  controller_->OnWorkerEvent("n3", Event("hello", 1, 0, kExited, 3), kT0 + 1);
  EXPECT_EQ(PhaseName(JobOrDie("hello")), "Starting");
  EXPECT_EQ(StateName(*Rank(JobOrDie("hello"), 0)), "Pending");
  // A rank that does not exist.
  controller_->OnWorkerEvent("n1", Event("hello", 1, 42, kExited, 3), kT0 + 1);
  EXPECT_EQ(PhaseName(JobOrDie("hello")), "Starting");
}

TEST_F(JobControllerTest, SuspendedJobIsNotPlaced) {
  std::string yaml = JobYaml("later", 1, 1);
  yaml.replace(yaml.find("  trainer:"), 0, "  suspend: true\n");
  ApplyOk(yaml);
  EXPECT_EQ(PhaseName(JobOrDie("later")), "Suspended");
  controller_->Schedule(kT0 + 1);
  EXPECT_TRUE(sink_.sent.empty());
}

}  // namespace
}  // namespace trainlet::coordinator
