// RankEventFold: what one worker event does to a job's status, as a pure step JobController
// applies.
//
// FoldWorkerEvent writes the event into the one rank it names (its state through the rank table
// of rank_state_machine.h, plus pid, exit code, signal, cpuset, devices or message) and says what
// that means for the attempt: nothing yet, every rank started, every rank succeeded, or failed
// with a cause. A rank of a replicated job other than the main one (RankStatus.step) also moves
// that step's story: StepStarted, StepCompleted and StepFailed events (once per step, not per
// worker) and JobStatus.step_progress_unix_ms. It changes nothing else of the status: the attempt
// record, the job's phase, the store, and any message to an agent are JobController's, which acts
// on the answer.
//
// Any thread; no state.
#pragma once

#include <cstdint>
#include <string>

#include "trainlet/v1/envelope.pb.h"

namespace trainlet::coordinator {

struct RankEventFold {
  enum class Effect {
    kStale,          // no such job, or not its current attempt: nothing folded (a Started one
                     // runs a rank that must not run: the caller stops it)
    kNotPlacedHere,  // the rank is not in the attempt, or placed on another node: nothing folded
    kUnknownKind,    // an event kind this coordinator does not know: nothing folded
    kFolded,         // the rank changed: the status is dirty, and `outcome` says what follows
  };
  // What the folded rank means for the attempt. Only a live attempt (Starting or Running) of a
  // job not being deleted has one; otherwise kNone.
  enum class Outcome {
    kNone,          // nothing to do yet
    kFailed,        // the rank failed or could not start: `cause` says which and how
    kAllSucceeded,  // every rank exited 0
    kAllStarted,    // the job is Starting and no rank is Pending any more
  };
  Effect effect = Effect::kStale;
  Outcome outcome = Outcome::kNone;
  // kFailed: "rank 3 on node-a exited with code 1"; for a step's worker "step
  // dataset-initializer on node-a exited with code 3: <the EXITED event's message>" (the
  // message, when the event carries one).
  std::string cause;
};

// Folds `event`, sent by `node`, into `status` (null: the job is not known). A report the rank
// table refuses (it came late or twice) leaves the rank's state as it was, is logged, and still
// counts as folded: the fields it carries are written.
// `now_ms`: the coordinator's wall clock, for a step's events and progress (0: the event's own).
RankEventFold FoldWorkerEvent(v1::JobStatus* status, const std::string& node,
                              const v1::WorkerEvent& event, int64_t now_ms = 0);

// How a rank ended, for an attempt's cause: "exited with code 1", "was killed by signal 9",
// "could not start: <message>".
std::string DescribeExit(const v1::RankStatus& rank);

}  // namespace trainlet::coordinator
