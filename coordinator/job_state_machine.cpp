#include "coordinator/job_state_machine.h"

#include <utility>

namespace trainlet::coordinator {

namespace {

constexpr std::array kPhaseNames = {
    std::pair{JobPhase::kPending, "Pending"},     std::pair{JobPhase::kStarting, "Starting"},
    std::pair{JobPhase::kRunning, "Running"},     std::pair{JobPhase::kRestarting, "Restarting"},
    std::pair{JobPhase::kSucceeded, "Succeeded"}, std::pair{JobPhase::kFailed, "Failed"},
    std::pair{JobPhase::kSuspended, "Suspended"},
};

bool IsWarning(JobTrigger trigger) {
  switch (trigger) {
    case JobTrigger::kUnplaceable:
    case JobTrigger::kAttemptFailed:
    case JobTrigger::kAttemptFailedFinal:
    case JobTrigger::kDeadlineExceeded:
    case JobTrigger::kPlanRefused:
      return true;
    default:
      return false;
  }
}

}  // namespace

void SetCondition(v1::JobStatus& status, std::string_view type, bool value, std::string_view reason,
                  const std::string& message, int64_t now_ms) {
  const char* value_str = value ? "True" : "False";
  v1::Condition* cond = nullptr;
  for (auto& c : *status.mutable_conditions()) {
    if (c.type() == type) cond = &c;
  }
  if (cond == nullptr) {
    cond = status.add_conditions();
    cond->set_type(std::string(type));
  }
  if (cond->status() != value_str || cond->unix_ms() == 0) cond->set_unix_ms(now_ms);
  cond->set_status(value_str);
  cond->set_reason(std::string(reason));
  cond->set_message(message);
}

void AppendEvent(v1::JobStatus& status, const char* type, const std::string& reason,
                 const std::string& message, int64_t now_ms) {
  auto* events = status.mutable_events();
  // A repeat of the last event (the planner saying "still unplaceable" every pass) refreshes its
  // time instead of pushing older history out.
  if (!events->empty()) {
    auto& last = *events->rbegin();
    if (last.type() == type && last.reason() == reason && last.message() == message) {
      last.set_unix_ms(now_ms);
      return;
    }
  }
  auto* ev = status.add_events();
  ev->set_unix_ms(now_ms);
  ev->set_type(type);
  ev->set_reason(reason);
  ev->set_message(message);
  if (events->size() > kMaxJobEvents) {
    events->DeleteSubrange(0, events->size() - kMaxJobEvents);
  }
}

const char* JobPhaseName(JobPhase phase) {
  for (const auto& [p, name] : kPhaseNames) {
    if (p == phase) return name;
  }
  TRAINLET_CHECK_MSG(false, "unknown JobPhase " + std::to_string(static_cast<int>(phase)));
}

std::optional<JobPhase> ParseJobPhase(std::string_view name) {
  for (const auto& [p, n] : kPhaseNames) {
    if (name == n) return p;
  }
  return std::nullopt;
}

bool IsJobPhase(int value) {
  return value != v1::JOB_PHASE_UNSPECIFIED && v1::JobPhase_IsValid(value);
}

JobPhase PhaseOf(const v1::JobStatus& status) {
  const int value = status.job_phase();
  if (value == v1::JOB_PHASE_UNSPECIFIED) return JobPhase::kPending;
  TRAINLET_CHECK_MSG(IsJobPhase(value), "trainjob/" + status.name() + ": job_phase " +
                                            std::to_string(value) + " is not a JobPhase");
  return static_cast<JobPhase>(value);
}

const char* JobTriggerName(JobTrigger trigger) {
  switch (trigger) {
    case JobTrigger::kPlaced:
      return "Placed";
    case JobTrigger::kUnplaceable:
      return "Unplaceable";
    case JobTrigger::kAllRanksStarted:
      return "AllRanksStarted";
    case JobTrigger::kAllRanksSucceeded:
      return "AllRanksSucceeded";
    case JobTrigger::kAttemptFailed:
      return "AttemptFailed";
    case JobTrigger::kAttemptFailedFinal:
      return "AttemptFailedFinal";
    case JobTrigger::kSuspend:
      return "Suspend";
    case JobTrigger::kResume:
      return "Resume";
    case JobTrigger::kDeadlineExceeded:
      return "DeadlineExceeded";
    case JobTrigger::kPlanRefused:
      return "PlanRefused";
  }
  TRAINLET_CHECK_MSG(false, "unknown JobTrigger " + std::to_string(static_cast<int>(trigger)));
}

std::optional<JobPhase> NextPhase(JobPhase from, JobTrigger trigger) {
  for (const Transition& t : kJobTransitions) {
    if (t.from == from && t.trigger == trigger) return t.to;
  }
  return std::nullopt;
}

bool IsTerminal(JobPhase phase) {
  return phase == JobPhase::kSucceeded || phase == JobPhase::kFailed;
}

Status ApplyTransition(v1::JobStatus& status, JobTrigger trigger, std::string reason,
                       std::string message, int64_t now_ms) {
  const JobPhase from = PhaseOf(status);
  std::optional<JobPhase> to = NextPhase(from, trigger);
  if (!to) {
    return InvalidError("trainjob/" + status.name() + ": " + JobTriggerName(trigger) +
                        " is not allowed in phase " + JobPhaseName(from));
  }
  if (reason.empty()) reason = JobTriggerName(trigger);

  status.set_job_phase(static_cast<v1::JobPhase>(*to));
  status.set_reason(reason);
  status.set_message(message);
  AppendEvent(status, IsWarning(trigger) ? "Warning" : "Normal", reason, message, now_ms);

  switch (*to) {
    case JobPhase::kSucceeded:
      SetCondition(status, kConditionComplete, true, reason, message, now_ms);
      break;
    case JobPhase::kFailed:
      SetCondition(status, kConditionFailed, true, reason, message, now_ms);
      break;
    case JobPhase::kSuspended:
      SetCondition(status, kConditionSuspended, true, kReasonSuspended, message, now_ms);
      break;
    default:
      break;
  }
  if (trigger == JobTrigger::kResume) {
    SetCondition(status, kConditionSuspended, false, kReasonResumed, message, now_ms);
  }
  return Status::Ok();
}

}  // namespace trainlet::coordinator
