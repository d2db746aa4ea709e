#include "coordinator/rank_state_machine.h"

#include <string>
#include <utility>

namespace trainlet::coordinator {

namespace {

// Frozen: these are also the spellings stored by trainlet before the enums, so changing one
// would make old databases unreadable.
constexpr std::array kRankStateNames = {
    std::pair{v1::RANK_STATE_PENDING, "Pending"},
    std::pair{v1::RANK_STATE_RUNNING, "Running"},
    std::pair{v1::RANK_STATE_SUCCEEDED, "Succeeded"},
    std::pair{v1::RANK_STATE_FAILED, "Failed"},
    std::pair{v1::RANK_STATE_START_FAILED, "StartFailed"},
    std::pair{v1::RANK_STATE_LOST, "Lost"},
    std::pair{v1::RANK_STATE_STOPPED, "Stopped"},
};

constexpr std::array kAttemptResultNames = {
    std::pair{kAttemptRunning, ""},
    std::pair{v1::ATTEMPT_RESULT_SUCCEEDED, "Succeeded"},
    std::pair{v1::ATTEMPT_RESULT_FAILED, "Failed"},
    std::pair{v1::ATTEMPT_RESULT_STOPPED, "Stopped"},
};

}  // namespace

std::optional<v1::RankState> NextRankState(v1::RankState from, RankTrigger trigger) {
  for (const RankTransition& t : kRankTransitions) {
    if (t.from == from && t.trigger == trigger) return t.to;
  }
  return std::nullopt;
}

Status ApplyRankTrigger(v1::RankStatus& rank, RankTrigger trigger) {
  std::optional<v1::RankState> to = NextRankState(rank.rank_state(), trigger);
  if (!to) {
    return InvalidError("rank " + std::to_string(rank.rank()) + " on " + rank.node() + ": " +
                        RankTriggerName(trigger) + " is not allowed in state " +
                        RankStateName(rank.rank_state()));
  }
  rank.set_rank_state(*to);
  return Status::Ok();
}

bool IsRankActive(v1::RankState state) {
  return state == v1::RANK_STATE_PENDING || state == v1::RANK_STATE_RUNNING;
}

std::optional<v1::AttemptResult> NextAttemptResult(v1::AttemptResult from, AttemptTrigger trigger) {
  for (const AttemptResultTransition& t : kAttemptResultTransitions) {
    if (t.from == from && t.trigger == trigger) return t.to;
  }
  return std::nullopt;
}

Status ApplyAttemptTrigger(v1::AttemptRecord& attempt, AttemptTrigger trigger) {
  std::optional<v1::AttemptResult> to = NextAttemptResult(attempt.attempt_result(), trigger);
  if (!to) {
    return InvalidError("attempt " + std::to_string(attempt.attempt()) + ": " +
                        AttemptTriggerName(trigger) + " is not allowed after it ended " +
                        AttemptResultName(attempt.attempt_result()));
  }
  attempt.set_attempt_result(*to);
  return Status::Ok();
}

bool AttemptEnded(const v1::AttemptRecord& attempt) {
  return attempt.attempt_result() != kAttemptRunning;
}

const char* RankStateName(v1::RankState state) {
  if (state == v1::RANK_STATE_UNSPECIFIED) return "Unspecified";  // never parsed back
  for (const auto& [s, name] : kRankStateNames) {
    if (s == state) return name;
  }
  TRAINLET_CHECK_MSG(false, "unknown RankState " + std::to_string(static_cast<int>(state)));
}

std::optional<v1::RankState> ParseRankState(std::string_view name) {
  for (const auto& [s, n] : kRankStateNames) {
    if (name == n) return s;
  }
  return std::nullopt;
}

const char* AttemptResultName(v1::AttemptResult result) {
  for (const auto& [r, name] : kAttemptResultNames) {
    if (r == result) return name;
  }
  TRAINLET_CHECK_MSG(false, "unknown AttemptResult " + std::to_string(static_cast<int>(result)));
}

std::optional<v1::AttemptResult> ParseAttemptResult(std::string_view name) {
  for (const auto& [r, n] : kAttemptResultNames) {
    if (name == n) return r;
  }
  return std::nullopt;
}

const char* RankTriggerName(RankTrigger trigger) {
  switch (trigger) {
    case RankTrigger::kStarted:
      return "Started";
    case RankTrigger::kExitedZero:
      return "ExitedZero";
    case RankTrigger::kExitedNonZero:
      return "ExitedNonZero";
    case RankTrigger::kStartFailed:
      return "StartFailed";
    case RankTrigger::kNodeLost:
      return "NodeLost";
    case RankTrigger::kAttemptStopped:
      return "AttemptStopped";
  }
  TRAINLET_CHECK_MSG(false, "unknown RankTrigger " + std::to_string(static_cast<int>(trigger)));
}

const char* AttemptTriggerName(AttemptTrigger trigger) {
  switch (trigger) {
    case AttemptTrigger::kAllRanksSucceeded:
      return "AllRanksSucceeded";
    case AttemptTrigger::kFailed:
      return "Failed";
    case AttemptTrigger::kStopped:
      return "Stopped";
  }
  TRAINLET_CHECK_MSG(false, "unknown AttemptTrigger " + std::to_string(static_cast<int>(trigger)));
}

}  // namespace trainlet::coordinator
