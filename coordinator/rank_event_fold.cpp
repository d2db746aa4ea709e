#include "coordinator/rank_event_fold.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "common/rendezvous/fence_message.h"
#include "coordinator/job_state_machine.h"
#include "coordinator/rank_state_machine.h"

namespace trainlet::coordinator {
namespace {

// A node's report the rank table refuses (it came late or twice) changes nothing; say so.
void LogRefused(const v1::WorkerEvent& ev, const Status& s) {
  if (!s.ok()) spdlog::warn("trainjob/{} attempt {}: {}", ev.job(), ev.attempt(), s.message());
}

// "called MPI_Abort (errorcode 7): <message>", for the rank's message.
std::string MpiAbortCall(const v1::WorkerEvent& ev) {
  const std::string cause =
      rendezvous::MpiAbortCause(ev.rank(), "", ev.mpi_abort_errorcode(), ev.mpi_abort_message());
  return cause.substr(cause.find("called"));
}

// Folds a worker event into its rank's status; false for an event kind it does not know.
bool FoldRankEvent(v1::RankStatus& rank, const v1::WorkerEvent& ev) {
  switch (ev.kind()) {
    case v1::WorkerEvent::KIND_STARTED:
      (void)ApplyRankTrigger(rank, RankTrigger::kStarted);  // only a Pending rank moves
      rank.set_pid(ev.pid());
      rank.set_cpuset(ev.cpuset());
      rank.set_devices(ev.devices());
      rank.set_cwd(ev.cwd());
      rank.set_workspace(ev.workspace());
      rank.set_run_as(ev.run_as());
      // The agent's note on its start: its CPUs are shared with other jobs (cpu_allotment.h).
      if (!ev.message().empty()) rank.set_message(ev.message());
      break;
    case v1::WorkerEvent::KIND_EXITED:
      rank.set_pid(ev.pid());
      rank.set_exit_code(ev.exit_code());
      rank.set_signal(ev.signal());
      // The agent's word on a failed exit (the last line of the worker's log).
      if (!ev.message().empty()) rank.set_message(ev.message());
      // A rank that called MPI_Abort failed, whatever its exit code (MPI_Abort(comm, 0) too).
      if (ev.mpi_abort()) rank.set_message(MpiAbortCall(ev));
      LogRefused(ev,
                 ApplyRankTrigger(rank, ev.exit_code() == 0 && ev.signal() == 0 && !ev.mpi_abort()
                                            ? RankTrigger::kExitedZero
                                            : RankTrigger::kExitedNonZero));
      break;
    case v1::WorkerEvent::KIND_START_FAILED:
      LogRefused(ev, ApplyRankTrigger(rank, RankTrigger::kStartFailed));
      rank.set_message(ev.message());
      break;
    default:
      return false;
  }
  return true;
}

// "step dataset-initializer on node-a exited with code 3: <the agent's message>".
std::string StepCause(const v1::RankStatus& rank, const std::string& node) {
  std::string cause = "step " + rank.step() + " on " + node + " " + DescribeExit(rank);
  if (rank.rank_state() == v1::RANK_STATE_FAILED && !rank.message().empty()) {
    cause += ": " + rank.message();
  }
  return cause;
}

// A step's story in the job's events, once per step and attempt: StepStarted when its first
// worker starts, StepCompleted when its last one on every node exited 0, StepFailed when its
// first one fails. A worker that starts or exits 0 is progress the start timeout counts from
// (attempt_steps.h: StartClockMs).
void NoteStepProgress(v1::JobStatus& st, const v1::RankStatus& rank, const std::string& node,
                      const v1::WorkerEvent& ev, int64_t now_ms) {
  if (rank.step().empty()) return;
  size_t workers = 0, left_pending = 0, succeeded = 0, failed = 0;
  for (const auto& r : st.ranks()) {
    if (r.step() != rank.step()) continue;
    ++workers;
    left_pending += r.rank_state() != v1::RANK_STATE_PENDING;
    succeeded += r.rank_state() == v1::RANK_STATE_SUCCEEDED;
    failed +=
        r.rank_state() == v1::RANK_STATE_FAILED || r.rank_state() == v1::RANK_STATE_START_FAILED;
  }
  const bool started =
      ev.kind() == v1::WorkerEvent::KIND_STARTED && rank.rank_state() == v1::RANK_STATE_RUNNING;
  const bool exited_zero = rank.rank_state() == v1::RANK_STATE_SUCCEEDED;
  // The coordinator's clock when it has one: the start timeout compares with it.
  const int64_t at = now_ms != 0 ? now_ms : ev.unix_ms();
  if (started || exited_zero) st.set_step_progress_unix_ms(at);
  const JobPhase phase = PhaseOf(st);
  if (st.deleting() || (phase != JobPhase::kStarting && phase != JobPhase::kRunning)) return;
  const std::string what = "step " + rank.step();
  if (started && left_pending == 1) {
    AppendEvent(st, "Normal", "StepStarted",
                what + " started (" + std::to_string(workers) + " worker(s) on the job's nodes)",
                at);
  } else if (exited_zero && succeeded == workers) {
    AppendEvent(st, "Normal", "StepCompleted",
                what + ": all " + std::to_string(workers) + " worker(s) exited 0", at);
  } else if (!started && !exited_zero && failed == 1 &&
             (rank.rank_state() == v1::RANK_STATE_FAILED ||
              rank.rank_state() == v1::RANK_STATE_START_FAILED)) {
    AppendEvent(st, "Warning", "StepFailed", StepCause(rank, node), at);
  }
}

// What the attempt does now that `rank` (on `node`) changed.
void DecideOutcome(const v1::JobStatus& st, const v1::RankStatus& rank, const std::string& node,
                   RankEventFold& fold) {
  const JobPhase phase = PhaseOf(st);
  if (st.deleting() || (phase != JobPhase::kStarting && phase != JobPhase::kRunning)) return;
  if (rank.rank_state() == v1::RANK_STATE_FAILED ||
      rank.rank_state() == v1::RANK_STATE_START_FAILED) {
    fold.outcome = RankEventFold::Outcome::kFailed;
    fold.cause = rank.step().empty() ? "rank " + std::to_string(rank.rank()) + " on " + node + " " +
                                           DescribeExit(rank)
                                     : StepCause(rank, node);
    return;
  }
  const auto& ranks = st.ranks();
  if (std::all_of(ranks.begin(), ranks.end(),
                  [](const auto& r) { return r.rank_state() == v1::RANK_STATE_SUCCEEDED; })) {
    fold.outcome = RankEventFold::Outcome::kAllSucceeded;
  } else if (phase == JobPhase::kStarting &&
             std::none_of(ranks.begin(), ranks.end(),
                          [](const auto& r) { return r.rank_state() == v1::RANK_STATE_PENDING; })) {
    fold.outcome = RankEventFold::Outcome::kAllStarted;
  }
}

// The agent's note that the attempt's CPUs on `node` are shared with other jobs
// (WorkerEvent.cpus_shared): a CpusShared event in the job's events, once per note, from a node
// of the attempt's placement. False when nothing was added.
bool NoteCpusShared(v1::JobStatus& st, const std::string& node, const v1::WorkerEvent& ev,
                    int64_t now_ms) {
  if (st.deleting() ||
      std::find(st.placement().begin(), st.placement().end(), node) == st.placement().end()) {
    return false;
  }
  for (const auto& e : st.events()) {
    if (e.reason() == "CpusShared" && e.message() == ev.cpus_shared()) return false;
  }
  AppendEvent(st, "Normal", "CpusShared", ev.cpus_shared(), now_ms != 0 ? now_ms : ev.unix_ms());
  return true;
}

}  // namespace

std::string DescribeExit(const v1::RankStatus& r) {
  if (r.rank_state() == v1::RANK_STATE_START_FAILED) return "could not start: " + r.message();
  if (r.signal() != 0) return "was killed by signal " + std::to_string(r.signal());
  return "exited with code " + std::to_string(r.exit_code());
}

RankEventFold FoldWorkerEvent(v1::JobStatus* st, const std::string& node, const v1::WorkerEvent& ev,
                              int64_t now_ms) {
  RankEventFold fold;
  if (st == nullptr || ev.attempt() != st->attempt()) return fold;  // kStale
  if (!ev.cpus_shared().empty()) {  // about the attempt's CPUs on the node, not about a rank
    fold.effect = NoteCpusShared(*st, node, ev, now_ms) ? RankEventFold::Effect::kFolded
                                                        : RankEventFold::Effect::kUnknownKind;
    return fold;
  }
  v1::RankStatus* rank = nullptr;
  for (auto& r : *st->mutable_ranks()) {
    if (r.rank() == ev.rank()) rank = &r;
  }
  if (rank == nullptr || rank->node() != node) {
    spdlog::warn("node {} reported rank {} of {}, which is not placed there", node, ev.rank(),
                 ev.job());
    fold.effect = RankEventFold::Effect::kNotPlacedHere;
    return fold;
  }
  if (!FoldRankEvent(*rank, ev)) {
    fold.effect = RankEventFold::Effect::kUnknownKind;
    return fold;
  }
  fold.effect = RankEventFold::Effect::kFolded;
  NoteStepProgress(*st, *rank, node, ev, now_ms);
  DecideOutcome(*st, *rank, node, fold);
  if (fold.outcome == RankEventFold::Outcome::kFailed && ev.mpi_abort() && rank->step().empty())
    fold.cause = rendezvous::MpiAbortCause(ev.rank(), node, ev.mpi_abort_errorcode(),
                                           ev.mpi_abort_message());
  return fold;
}

}  // namespace trainlet::coordinator
