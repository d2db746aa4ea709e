#include "trainletctl/state_text.h"

namespace trainlet::cli {

namespace {

std::string Unknown(int value) { return "Unknown(" + std::to_string(value) + ")"; }

std::string PhaseWord(v1::JobPhase phase, const std::string& old) {
  switch (phase) {
    case v1::JOB_PHASE_UNSPECIFIED:
      return old.empty() ? "Pending" : old;
    case v1::JOB_PHASE_PENDING:
      return "Pending";
    case v1::JOB_PHASE_STARTING:
      return "Starting";
    case v1::JOB_PHASE_RUNNING:
      return "Running";
    case v1::JOB_PHASE_RESTARTING:
      return "Restarting";
    case v1::JOB_PHASE_SUCCEEDED:
      return "Succeeded";
    case v1::JOB_PHASE_FAILED:
      return "Failed";
    case v1::JOB_PHASE_SUSPENDED:
      return "Suspended";
    default:
      return Unknown(phase);
  }
}

}  // namespace

std::string PhaseText(const v1::JobStatus& job) { return PhaseWord(job.job_phase(), job.phase()); }

std::string ReasonText(const v1::JobStatus& job) {
  return job.message().empty() ? job.reason() : job.reason() + ": " + job.message();
}

std::string PhaseText(const v1::SuspendJobResult& result) {
  return PhaseWord(result.job_phase(), result.phase());
}

std::string StateText(const v1::RankStatus& rank) {
  switch (rank.rank_state()) {
    case v1::RANK_STATE_UNSPECIFIED:
      return rank.state();  // an older coordinator's string, or nothing
    case v1::RANK_STATE_PENDING:
      return "Pending";
    case v1::RANK_STATE_RUNNING:
      return "Running";
    case v1::RANK_STATE_SUCCEEDED:
      return "Succeeded";
    case v1::RANK_STATE_FAILED:
      return "Failed";
    case v1::RANK_STATE_START_FAILED:
      return "StartFailed";
    case v1::RANK_STATE_LOST:
      return "Lost";
    case v1::RANK_STATE_STOPPED:
      return "Stopped";
    default:
      return Unknown(rank.rank_state());
  }
}

std::string ResultText(const v1::AttemptRecord& attempt) {
  switch (attempt.attempt_result()) {
    case v1::ATTEMPT_RESULT_UNSPECIFIED:
      return attempt.result().empty() ? "Running" : attempt.result();
    case v1::ATTEMPT_RESULT_SUCCEEDED:
      return "Succeeded";
    case v1::ATTEMPT_RESULT_FAILED:
      return "Failed";
    case v1::ATTEMPT_RESULT_STOPPED:
      return "Stopped";
    default:
      return Unknown(attempt.attempt_result());
  }
}

void FillStateStrings(v1::JobStatus& job) {
  job.set_phase(PhaseText(job));
  for (auto& r : *job.mutable_ranks()) r.set_state(StateText(r));
  for (auto& a : *job.mutable_attempts()) {
    const bool running = a.attempt_result() == v1::ATTEMPT_RESULT_UNSPECIFIED && a.result().empty();
    a.set_result(running ? "" : ResultText(a));
  }
}

void FillStateStrings(v1::JobList& jobs) {
  for (auto& j : *jobs.mutable_jobs()) FillStateStrings(j);
}

}  // namespace trainlet::cli
