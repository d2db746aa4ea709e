#include "coordinator/stored_status.h"

#include <string>

#include "coordinator/job_state_machine.h"
#include "coordinator/rank_state_machine.h"

namespace trainlet::coordinator {

namespace {

std::string Quoted(const std::string& s) { return "\"" + s + "\""; }

Status UpgradePhase(v1::JobStatus& status) {
  if (status.job_phase() == v1::JOB_PHASE_UNSPECIFIED && !status.phase().empty()) {
    const std::optional<JobPhase> phase = ParseJobPhase(status.phase());
    if (!phase) return InvalidError("status.phase: unknown phase " + Quoted(status.phase()));
    status.set_job_phase(static_cast<v1::JobPhase>(*phase));
  }
  status.clear_phase();
  const int value = status.job_phase();
  if (value != v1::JOB_PHASE_UNSPECIFIED && !IsJobPhase(value)) {
    return InvalidError("status.job_phase: unknown value " + std::to_string(value));
  }
  return Status::Ok();
}

Status UpgradeRank(v1::RankStatus& rank) {
  const std::string where = "rank " + std::to_string(rank.rank());
  if (rank.rank_state() == v1::RANK_STATE_UNSPECIFIED) {
    const std::optional<v1::RankState> state = ParseRankState(rank.state());
    if (!state) return InvalidError(where + ": unknown state " + Quoted(rank.state()));
    rank.set_rank_state(*state);
  }
  rank.clear_state();
  if (!v1::RankState_IsValid(rank.rank_state())) {
    return InvalidError(where + ": unknown rank_state " + std::to_string(rank.rank_state()));
  }
  return Status::Ok();
}

Status UpgradeAttempt(v1::AttemptRecord& attempt) {
  const std::string where = "attempt " + std::to_string(attempt.attempt());
  if (attempt.attempt_result() == kAttemptRunning) {
    const std::optional<v1::AttemptResult> result = ParseAttemptResult(attempt.result());
    if (!result) return InvalidError(where + ": unknown result " + Quoted(attempt.result()));
    attempt.set_attempt_result(*result);
  }
  attempt.clear_result();
  if (!v1::AttemptResult_IsValid(attempt.attempt_result())) {
    return InvalidError(where + ": unknown attempt_result " +
                        std::to_string(attempt.attempt_result()));
  }
  return Status::Ok();
}

}  // namespace

Status UpgradeStoredStatus(v1::JobStatus& status) {
  TRAINLET_RETURN_IF_ERROR(UpgradePhase(status));
  for (v1::RankStatus& rank : *status.mutable_ranks()) TRAINLET_RETURN_IF_ERROR(UpgradeRank(rank));
  for (v1::AttemptRecord& attempt : *status.mutable_attempts()) {
    TRAINLET_RETURN_IF_ERROR(UpgradeAttempt(attempt));
  }
  return Status::Ok();
}

}  // namespace trainlet::coordinator
