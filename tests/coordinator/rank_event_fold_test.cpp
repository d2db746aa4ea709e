#include "coordinator/rank_event_fold.h"

#include <gtest/gtest.h>

namespace trainlet::coordinator {
namespace {

using Effect = RankEventFold::Effect;
using Outcome = RankEventFold::Outcome;

// Attempt 2 of a two-rank job: rank 0 on node-a, rank 1 on node-b, both Pending.
v1::JobStatus TwoRanks(v1::JobPhase phase = v1::JOB_PHASE_STARTING) {
  v1::JobStatus st;
  st.set_name("j");
  st.set_attempt(2);
  st.set_job_phase(phase);
  for (uint32_t i = 0; i < 2; ++i) {
    auto* r = st.add_ranks();
    r->set_rank(i);
    r->set_node(i == 0 ? "node-a" : "node-b");
    r->set_attempt(2);
    r->set_rank_state(v1::RANK_STATE_PENDING);
  }
  return st;
}

v1::WorkerEvent Event(v1::WorkerEvent::Kind kind, uint32_t rank, uint32_t attempt = 2) {
  v1::WorkerEvent ev;
  ev.set_job("j");
  ev.set_attempt(attempt);
  ev.set_rank(rank);
  ev.set_kind(kind);
  return ev;
}

v1::WorkerEvent Exited(uint32_t rank, int32_t code, int32_t signal = 0) {
  v1::WorkerEvent ev = Event(v1::WorkerEvent::KIND_EXITED, rank);
  ev.set_exit_code(code);
  ev.set_signal(signal);
  ev.set_pid(100 + rank);
  return ev;
}

TEST(RankEventFold, UnknownJobIsStale) {
  auto fold = FoldWorkerEvent(nullptr, "node-a", Event(v1::WorkerEvent::KIND_STARTED, 0));
  EXPECT_EQ(fold.effect, Effect::kStale);
}

TEST(RankEventFold, OlderAttemptIsStaleAndFoldsNothing) {
  v1::JobStatus st = TwoRanks();
  const v1::JobStatus before = st;
  auto fold = FoldWorkerEvent(&st, "node-a", Event(v1::WorkerEvent::KIND_STARTED, 0, 1));
  EXPECT_EQ(fold.effect, Effect::kStale);
  EXPECT_EQ(st.SerializeAsString(), before.SerializeAsString());
}

TEST(RankEventFold, RankOfAnotherNodeOrUnknownRankIsNotPlacedHere) {
  v1::JobStatus st = TwoRanks();
  EXPECT_EQ(FoldWorkerEvent(&st, "node-b", Event(v1::WorkerEvent::KIND_STARTED, 0)).effect,
            Effect::kNotPlacedHere);
  EXPECT_EQ(FoldWorkerEvent(&st, "node-a", Event(v1::WorkerEvent::KIND_STARTED, 7)).effect,
            Effect::kNotPlacedHere);
  EXPECT_EQ(st.ranks(0).rank_state(), v1::RANK_STATE_PENDING);
}

TEST(RankEventFold, UnknownKindFoldsNothing) {
  v1::JobStatus st = TwoRanks();
  auto fold = FoldWorkerEvent(&st, "node-a", Event(v1::WorkerEvent::KIND_UNSPECIFIED, 0));
  EXPECT_EQ(fold.effect, Effect::kUnknownKind);
  EXPECT_EQ(st.ranks(0).rank_state(), v1::RANK_STATE_PENDING);
}

TEST(RankEventFold, StartedRanksMoveTheAttemptToAllStarted) {
  v1::JobStatus st = TwoRanks();
  v1::WorkerEvent ev = Event(v1::WorkerEvent::KIND_STARTED, 0);
  ev.set_pid(42);
  ev.set_cpuset("0-3");
  ev.set_devices("0");
  ev.set_cwd("/state/work/j");
  ev.set_workspace("/workspace (private mount namespace)");
  auto fold = FoldWorkerEvent(&st, "node-a", ev);
  EXPECT_EQ(fold.effect, Effect::kFolded);
  EXPECT_EQ(fold.outcome, Outcome::kNone);  // rank 1 still Pending
  EXPECT_EQ(st.ranks(0).rank_state(), v1::RANK_STATE_RUNNING);
  EXPECT_EQ(st.ranks(0).pid(), 42);
  EXPECT_EQ(st.ranks(0).cpuset(), "0-3");
  EXPECT_EQ(st.ranks(0).devices(), "0");
  EXPECT_EQ(st.ranks(0).cwd(), "/state/work/j");
  EXPECT_EQ(st.ranks(0).workspace(), "/workspace (private mount namespace)");
  fold = FoldWorkerEvent(&st, "node-b", Event(v1::WorkerEvent::KIND_STARTED, 1));
  EXPECT_EQ(fold.outcome, Outcome::kAllStarted);
}

// An agent that had to give a rank CPUs another job holds says so with its start; describe shows
// it as the rank's message (issue 19, defect 11).
TEST(RankEventFold, StartedRankKeepsTheAgentsNoteOnItsCpus) {
  v1::JobStatus st = TwoRanks();
  v1::WorkerEvent ev = Event(v1::WorkerEvent::KIND_STARTED, 0);
  ev.set_cpuset("0");
  ev.set_message("CPUs 0 of node node-a shared with trainjob/a (no free CPUs left)");
  FoldWorkerEvent(&st, "node-a", ev);
  EXPECT_EQ(st.ranks(0).message(), ev.message());
  // An exit without a message of its own keeps it.
  FoldWorkerEvent(&st, "node-a", Exited(0, 0));
  EXPECT_EQ(st.ranks(0).message(), ev.message());
}

// A node's note that the attempt's CPUs there are shared (WorkerEvent.cpus_shared), from a node
// that may run no rank of it (an MPI job's other nodes): a CpusShared event, once; describe and
// -o json show the job's events (issue 19, defect 11).
TEST(RankEventFold, CpusSharedNoteBecomesAJobEventOncePerNote) {
  v1::JobStatus st = TwoRanks(v1::JOB_PHASE_RUNNING);
  st.add_placement("node-a");
  st.add_placement("node-c");  // holds no rank of the attempt
  v1::WorkerEvent ev;
  ev.set_job("j");
  ev.set_attempt(2);
  ev.set_node("node-c");
  ev.set_cpus_shared(
      "attempt 2: CPUs 0-1 of node node-c shared with trainjob/a (no free CPUs "
      "left)");
  const v1::JobStatus ranks_before = st;
  auto fold = FoldWorkerEvent(&st, "node-c", ev, 5);
  EXPECT_EQ(fold.effect, Effect::kFolded);
  EXPECT_EQ(fold.outcome, Outcome::kNone);
  ASSERT_EQ(st.events_size(), 1);
  EXPECT_EQ(st.events(0).reason(), "CpusShared");
  EXPECT_EQ(st.events(0).type(), "Normal");
  EXPECT_EQ(st.events(0).message(), ev.cpus_shared());
  for (int i = 0; i < 2; ++i) EXPECT_EQ(st.ranks(i).rank_state(), v1::RANK_STATE_PENDING);
  // The same note again (a plan resent) adds nothing; one of an older attempt is stale.
  EXPECT_EQ(FoldWorkerEvent(&st, "node-c", ev, 6).effect, Effect::kUnknownKind);
  ev.set_attempt(1);
  EXPECT_EQ(FoldWorkerEvent(&st, "node-c", ev, 6).effect, Effect::kStale);
  // A node outside the placement cannot speak for the job.
  ev.set_attempt(2);
  ev.set_cpus_shared("attempt 2: CPUs 3 of node node-x shared with trainjob/a (no free CPUs left)");
  EXPECT_EQ(FoldWorkerEvent(&st, "node-x", ev, 7).effect, Effect::kUnknownKind);
  EXPECT_EQ(st.events_size(), 1);
}

TEST(RankEventFold, DuplicateStartedIsFoldedButChangesNoState) {
  v1::JobStatus st = TwoRanks(v1::JOB_PHASE_RUNNING);
  st.mutable_ranks(0)->set_rank_state(v1::RANK_STATE_RUNNING);
  st.mutable_ranks(1)->set_rank_state(v1::RANK_STATE_RUNNING);
  auto fold = FoldWorkerEvent(&st, "node-a", Event(v1::WorkerEvent::KIND_STARTED, 0));
  EXPECT_EQ(fold.effect, Effect::kFolded);
  EXPECT_EQ(fold.outcome, Outcome::kNone);  // Running: "all started" is not news
  EXPECT_EQ(st.ranks(0).rank_state(), v1::RANK_STATE_RUNNING);
}

TEST(RankEventFold, EveryRankExitingZeroSucceeds) {
  v1::JobStatus st = TwoRanks(v1::JOB_PHASE_RUNNING);
  EXPECT_EQ(FoldWorkerEvent(&st, "node-a", Exited(0, 0)).outcome, Outcome::kNone);
  EXPECT_EQ(st.ranks(0).rank_state(), v1::RANK_STATE_SUCCEEDED);
  EXPECT_EQ(st.ranks(0).pid(), 100);
  EXPECT_EQ(FoldWorkerEvent(&st, "node-b", Exited(1, 0)).outcome, Outcome::kAllSucceeded);
}

TEST(RankEventFold, NonZeroExitFailsTheAttemptNamingRankNodeAndCode) {
  v1::JobStatus st = TwoRanks(v1::JOB_PHASE_RUNNING);
  auto fold = FoldWorkerEvent(&st, "node-b", Exited(1, 3));
  EXPECT_EQ(fold.outcome, Outcome::kFailed);
  EXPECT_EQ(fold.cause, "rank 1 on node-b exited with code 3");
  EXPECT_EQ(st.ranks(1).rank_state(), v1::RANK_STATE_FAILED);
  EXPECT_EQ(st.ranks(1).exit_code(), 3);
}

TEST(RankEventFold, SignalFailsTheAttemptNamingTheSignal) {
  v1::JobStatus st = TwoRanks(v1::JOB_PHASE_RUNNING);
  auto fold = FoldWorkerEvent(&st, "node-a", Exited(0, 0, 9));
  EXPECT_EQ(fold.outcome, Outcome::kFailed);
  EXPECT_EQ(fold.cause, "rank 0 on node-a was killed by signal 9");
}

// A direct-launch MPI rank that called MPI_Abort (the agent heard it from trainlet-pmix): the
// cause names the call, its errorcode and message, not only the exit code.
TEST(RankEventFold, MpiAbortFailsTheAttemptNamingTheCallCodeAndMessage) {
  v1::JobStatus st = TwoRanks(v1::JOB_PHASE_RUNNING);
  v1::WorkerEvent ev = Exited(1, 7);
  ev.set_mpi_abort(true);
  ev.set_mpi_abort_errorcode(7);
  ev.set_mpi_abort_message("bad input\nsee log");
  auto fold = FoldWorkerEvent(&st, "node-b", ev);
  EXPECT_EQ(fold.outcome, Outcome::kFailed);
  EXPECT_EQ(fold.cause, "rank 1 on node-b called MPI_Abort (errorcode 7): bad input see log");
  EXPECT_EQ(st.ranks(1).rank_state(), v1::RANK_STATE_FAILED);
  EXPECT_EQ(st.ranks(1).message(), "called MPI_Abort (errorcode 7): bad input see log");
}

// MPI_Abort(comm, 0) ends the rank with 0: still a failure, since the rank aborted.
TEST(RankEventFold, MpiAbortWithErrorcodeZeroStillFails) {
  v1::JobStatus st = TwoRanks(v1::JOB_PHASE_RUNNING);
  v1::WorkerEvent ev = Exited(0, 0);
  ev.set_mpi_abort(true);
  auto fold = FoldWorkerEvent(&st, "node-a", ev);
  EXPECT_EQ(fold.outcome, Outcome::kFailed);
  EXPECT_EQ(fold.cause, "rank 0 on node-a called MPI_Abort (errorcode 0)");
  EXPECT_EQ(st.ranks(0).rank_state(), v1::RANK_STATE_FAILED);
}

TEST(RankEventFold, StartFailedFailsTheAttemptWithItsMessage) {
  v1::JobStatus st = TwoRanks();
  v1::WorkerEvent ev = Event(v1::WorkerEvent::KIND_START_FAILED, 0);
  ev.set_message("no such file");
  auto fold = FoldWorkerEvent(&st, "node-a", ev);
  EXPECT_EQ(fold.outcome, Outcome::kFailed);
  EXPECT_EQ(fold.cause, "rank 0 on node-a could not start: no such file");
  EXPECT_EQ(st.ranks(0).rank_state(), v1::RANK_STATE_START_FAILED);
}

TEST(RankEventFold, LostRankThatExitsLaterIsFoldedWithoutOutcomeOnceTheJobMovedOn) {
  v1::JobStatus st = TwoRanks(v1::JOB_PHASE_RESTARTING);
  st.mutable_ranks(0)->set_rank_state(v1::RANK_STATE_LOST);
  auto fold = FoldWorkerEvent(&st, "node-a", Exited(0, 1));
  EXPECT_EQ(fold.effect, Effect::kFolded);
  EXPECT_EQ(fold.outcome, Outcome::kNone);  // the attempt already failed
  EXPECT_EQ(st.ranks(0).rank_state(), v1::RANK_STATE_FAILED);
}

TEST(RankEventFold, LateExitOfAnEndedRankKeepsItsState) {
  v1::JobStatus st = TwoRanks(v1::JOB_PHASE_RUNNING);
  st.mutable_ranks(0)->set_rank_state(v1::RANK_STATE_SUCCEEDED);
  auto fold = FoldWorkerEvent(&st, "node-a", Exited(0, 1));  // refused by the rank table
  EXPECT_EQ(fold.effect, Effect::kFolded);
  EXPECT_EQ(st.ranks(0).rank_state(), v1::RANK_STATE_SUCCEEDED);
  EXPECT_EQ(fold.outcome, Outcome::kNone);
}

TEST(RankEventFold, DeletingJobHasNoOutcome) {
  v1::JobStatus st = TwoRanks(v1::JOB_PHASE_RUNNING);
  st.set_deleting(true);
  auto fold = FoldWorkerEvent(&st, "node-a", Exited(0, 1));
  EXPECT_EQ(fold.effect, Effect::kFolded);
  EXPECT_EQ(fold.outcome, Outcome::kNone);
}

// Two ranks of "node" and, after them, one dataset-initializer worker per node (ranks 2, 3).
v1::JobStatus WithInitializer() {
  v1::JobStatus st = TwoRanks();
  for (uint32_t i = 2; i < 4; ++i) {
    auto* r = st.add_ranks();
    r->set_rank(i);
    r->set_node(i == 2 ? "node-a" : "node-b");
    r->set_attempt(2);
    r->set_rank_state(v1::RANK_STATE_PENDING);
    r->set_step("dataset-initializer");
  }
  return st;
}

std::vector<std::string> Reasons(const v1::JobStatus& st) {
  std::vector<std::string> out;
  for (const auto& e : st.events()) out.push_back(e.reason());
  return out;
}

TEST(RankEventFold, AFailedStepWorkerFailsTheAttemptNamingTheStepAndTheAgentsMessage) {
  v1::JobStatus st = WithInitializer();
  v1::WorkerEvent started = Event(v1::WorkerEvent::KIND_STARTED, 2);
  started.set_unix_ms(1000);
  FoldWorkerEvent(&st, "node-a", started);
  v1::WorkerEvent ev = Exited(2, 3);
  ev.set_message("hf://x: the huggingface_hub module is not importable on this node");
  auto fold = FoldWorkerEvent(&st, "node-a", ev);
  EXPECT_EQ(fold.outcome, Outcome::kFailed);
  EXPECT_EQ(fold.cause,
            "step dataset-initializer on node-a exited with code 3: hf://x: the huggingface_hub "
            "module is not importable on this node");
  EXPECT_EQ(Reasons(st), (std::vector<std::string>{"StepStarted", "StepFailed"}));
  EXPECT_EQ(st.events(1).message(), fold.cause);

  // Without a message, the cause ends at the exit.
  v1::JobStatus quiet = WithInitializer();
  FoldWorkerEvent(&quiet, "node-b", Event(v1::WorkerEvent::KIND_STARTED, 3));
  EXPECT_EQ(FoldWorkerEvent(&quiet, "node-b", Exited(3, 1)).cause,
            "step dataset-initializer on node-b exited with code 1");
}

TEST(RankEventFold, AStepCompletesWhenEveryWorkerOnEveryNodeExitedZero) {
  v1::JobStatus st = WithInitializer();
  for (uint32_t r : {2u, 3u}) {
    v1::WorkerEvent ev = Event(v1::WorkerEvent::KIND_STARTED, r);
    ev.set_unix_ms(1000 + r);
    FoldWorkerEvent(&st, r == 2 ? "node-a" : "node-b", ev);
  }
  EXPECT_EQ(st.step_progress_unix_ms(), 1003);
  v1::WorkerEvent done = Exited(2, 0);
  done.set_unix_ms(2000);
  EXPECT_EQ(FoldWorkerEvent(&st, "node-a", done).outcome, Outcome::kNone);
  EXPECT_EQ(Reasons(st), (std::vector<std::string>{"StepStarted"}));  // once, not per worker
  done = Exited(3, 0);
  done.set_unix_ms(3000);
  // The main ranks have still to start: neither all started nor all succeeded.
  EXPECT_EQ(FoldWorkerEvent(&st, "node-b", done).outcome, Outcome::kNone);
  EXPECT_EQ(Reasons(st), (std::vector<std::string>{"StepStarted", "StepCompleted"}));
  EXPECT_EQ(st.step_progress_unix_ms(), 3000);
  // Success is every rank of every step.
  for (uint32_t r : {0u, 1u}) {
    FoldWorkerEvent(&st, r == 0 ? "node-a" : "node-b", Event(v1::WorkerEvent::KIND_STARTED, r));
  }
  st.set_job_phase(v1::JOB_PHASE_RUNNING);
  EXPECT_EQ(FoldWorkerEvent(&st, "node-a", Exited(0, 0)).outcome, Outcome::kNone);
  EXPECT_EQ(FoldWorkerEvent(&st, "node-b", Exited(1, 0)).outcome, Outcome::kAllSucceeded);
}

}  // namespace
}  // namespace trainlet::coordinator
