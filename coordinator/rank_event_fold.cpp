#include "coordinator/rank_event_fold.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "coordinator/job_state_machine.h"
#include "coordinator/rank_state_machine.h"

namespace trainlet::coordinator {
namespace {

// A node's report the rank table refuses (it came late or twice) changes nothing; say so.
void LogRefused(const v1::WorkerEvent& ev, const Status& s) {
  if (!s.ok()) spdlog::warn("trainjob/{} attempt {}: {}", ev.job(), ev.attempt(), s.message());
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
      break;
    case v1::WorkerEvent::KIND_EXITED:
      rank.set_pid(ev.pid());
      rank.set_exit_code(ev.exit_code());
      rank.set_signal(ev.signal());
      LogRefused(ev, ApplyRankTrigger(rank, ev.exit_code() == 0 && ev.signal() == 0
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

// What the attempt does now that `rank` (on `node`) changed.
void DecideOutcome(const v1::JobStatus& st, const v1::RankStatus& rank, const std::string& node,
                   RankEventFold& fold) {
  const JobPhase phase = PhaseOf(st);
  if (st.deleting() || (phase != JobPhase::kStarting && phase != JobPhase::kRunning)) return;
  if (rank.rank_state() == v1::RANK_STATE_FAILED ||
      rank.rank_state() == v1::RANK_STATE_START_FAILED) {
    fold.outcome = RankEventFold::Outcome::kFailed;
    fold.cause = "rank " + std::to_string(rank.rank()) + " on " + node + " " + DescribeExit(rank);
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

}  // namespace

std::string DescribeExit(const v1::RankStatus& r) {
  if (r.rank_state() == v1::RANK_STATE_START_FAILED) return "could not start: " + r.message();
  if (r.signal() != 0) return "was killed by signal " + std::to_string(r.signal());
  return "exited with code " + std::to_string(r.exit_code());
}

RankEventFold FoldWorkerEvent(v1::JobStatus* st, const std::string& node,
                              const v1::WorkerEvent& ev) {
  RankEventFold fold;
  if (st == nullptr || ev.attempt() != st->attempt()) return fold;  // kStale
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
  DecideOutcome(*st, *rank, node, fold);
  return fold;
}

}  // namespace trainlet::coordinator
