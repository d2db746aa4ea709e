// The states of one attempt, as two tables in the style of kJobTransitions (job_state_machine.h):
// each rank's RankState, moved by what its node reports, and the attempt's AttemptResult.
//
// Every change of RankStatus.rank_state after the rank is created (Pending, when the attempt is
// placed) goes through ApplyRankTrigger(); every change of AttemptRecord.attempt_result goes
// through ApplyAttemptTrigger(). The enums are the operator API's
// (proto/trainlet/v1/operator.proto); the words trainletctl shows for them live in the CLI.
//
// Pure functions, no I/O: safe from any thread.
#pragma once

#include <array>
#include <optional>
#include <string_view>

#include "common/status.h"
#include "trainlet/v1/operator.pb.h"

namespace trainlet::coordinator {

enum class RankTrigger {
  kStarted,         // its node reported the process started, or still running when it registered
  kExitedZero,      // its node reported it exited with code 0
  kExitedNonZero,   // its node reported it exited non-zero or was killed by a signal
  kStartFailed,     // its node could not start it
  kNodeLost,        // its node was declared lost while the rank was placed there
  kAttemptStopped,  // the attempt ended before this rank started (e.g. its ports were not reserved)
};

struct RankTransition {
  v1::RankState from;
  RankTrigger trigger;
  v1::RankState to;
};

// A rank's whole life. A (from, trigger) pair that is not listed is forbidden: a node reporting
// a rank started twice, or exited after it already exited, changes nothing. Lost and Stopped are
// the coordinator's own conclusions, not a node's report; when the node later says how the rank
// really ended, that report replaces them. Succeeded, Failed and StartFailed appear in no `from`
// column.
// clang-format off
inline constexpr std::array kRankTransitions = {
    //             from                       trigger                        to
    RankTransition{v1::RANK_STATE_PENDING,    RankTrigger::kStarted,         v1::RANK_STATE_RUNNING},
    RankTransition{v1::RANK_STATE_PENDING,    RankTrigger::kExitedZero,      v1::RANK_STATE_SUCCEEDED},
    RankTransition{v1::RANK_STATE_PENDING,    RankTrigger::kExitedNonZero,   v1::RANK_STATE_FAILED},
    RankTransition{v1::RANK_STATE_PENDING,    RankTrigger::kStartFailed,     v1::RANK_STATE_START_FAILED},
    RankTransition{v1::RANK_STATE_PENDING,    RankTrigger::kNodeLost,        v1::RANK_STATE_LOST},
    RankTransition{v1::RANK_STATE_PENDING,    RankTrigger::kAttemptStopped,  v1::RANK_STATE_STOPPED},
    RankTransition{v1::RANK_STATE_RUNNING,    RankTrigger::kExitedZero,      v1::RANK_STATE_SUCCEEDED},
    RankTransition{v1::RANK_STATE_RUNNING,    RankTrigger::kExitedNonZero,   v1::RANK_STATE_FAILED},
    RankTransition{v1::RANK_STATE_RUNNING,    RankTrigger::kStartFailed,     v1::RANK_STATE_START_FAILED},
    RankTransition{v1::RANK_STATE_RUNNING,    RankTrigger::kNodeLost,        v1::RANK_STATE_LOST},
    RankTransition{v1::RANK_STATE_LOST,       RankTrigger::kExitedZero,      v1::RANK_STATE_SUCCEEDED},
    RankTransition{v1::RANK_STATE_LOST,       RankTrigger::kExitedNonZero,   v1::RANK_STATE_FAILED},
    RankTransition{v1::RANK_STATE_LOST,       RankTrigger::kStartFailed,     v1::RANK_STATE_START_FAILED},
    RankTransition{v1::RANK_STATE_STOPPED,    RankTrigger::kExitedZero,      v1::RANK_STATE_SUCCEEDED},
    RankTransition{v1::RANK_STATE_STOPPED,    RankTrigger::kExitedNonZero,   v1::RANK_STATE_FAILED},
    RankTransition{v1::RANK_STATE_STOPPED,    RankTrigger::kStartFailed,     v1::RANK_STATE_START_FAILED},
};
// clang-format on

// The state `trigger` leads to from `from`, or nullopt when the table forbids it.
std::optional<v1::RankState> NextRankState(v1::RankState from, RankTrigger trigger);
// Moves `rank` along kRankTransitions. Returns Invalid, naming the rank, its state and the
// trigger, and leaves `rank` untouched when the table forbids the move. A node's report may come
// late or twice, so callers acting on one log the error and go on; callers acting on their own
// decision check the state first, and a refusal there is a broken invariant.
Status ApplyRankTrigger(v1::RankStatus& rank, RankTrigger trigger);
// Pending or Running: the rank holds its place on its node and has not ended.
bool IsRankActive(v1::RankState state);

enum class AttemptTrigger {
  kAllRanksSucceeded,  // every rank of the attempt exited 0
  kFailed,             // a rank failed, a node was lost, the deadline passed, a drain forced it
  kStopped,            // the job was suspended; not a failure
};

struct AttemptResultTransition {
  v1::AttemptResult from;
  AttemptTrigger trigger;
  v1::AttemptResult to;
};

// An attempt that has no result yet is running.
inline constexpr v1::AttemptResult kAttemptRunning = v1::ATTEMPT_RESULT_UNSPECIFIED;

// An attempt ends once; every result is final.
// clang-format off
inline constexpr std::array kAttemptResultTransitions = {
    //                      from             trigger                             to
    AttemptResultTransition{kAttemptRunning, AttemptTrigger::kAllRanksSucceeded, v1::ATTEMPT_RESULT_SUCCEEDED},
    AttemptResultTransition{kAttemptRunning, AttemptTrigger::kFailed,            v1::ATTEMPT_RESULT_FAILED},
    AttemptResultTransition{kAttemptRunning, AttemptTrigger::kStopped,           v1::ATTEMPT_RESULT_STOPPED},
};
// clang-format on

// The result `trigger` leads to from `from`, or nullopt when the table forbids it.
std::optional<v1::AttemptResult> NextAttemptResult(v1::AttemptResult from, AttemptTrigger trigger);
// Moves `attempt` along kAttemptResultTransitions. Returns Invalid, naming the attempt, its result
// and the trigger, and leaves `attempt` untouched when the table forbids the move.
Status ApplyAttemptTrigger(v1::AttemptRecord& attempt, AttemptTrigger trigger);
// The attempt has a result: no trigger moves it any more.
bool AttemptEnded(const v1::AttemptRecord& attempt);

// "Pending", "StartFailed", ...: the names the coordinator logs and that records written before
// the enums (RankStatus.state) hold. Stops on a value that is not a RankState.
const char* RankStateName(v1::RankState state);
// Exact, case-sensitive inverse of RankStateName; nullopt for anything else, "" included.
std::optional<v1::RankState> ParseRankState(std::string_view name);
// "Succeeded", "Failed", "Stopped", and "" for a running attempt, as AttemptRecord.result held.
const char* AttemptResultName(v1::AttemptResult result);
// Exact inverse of AttemptResultName ("" is a running attempt); nullopt for anything else.
std::optional<v1::AttemptResult> ParseAttemptResult(std::string_view name);
// "Started", "ExitedZero", ...: for messages.
const char* RankTriggerName(RankTrigger trigger);
const char* AttemptTriggerName(AttemptTrigger trigger);

}  // namespace trainlet::coordinator
