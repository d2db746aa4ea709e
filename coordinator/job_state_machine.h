// The lifecycle of a TrainJob as one table of (phase, trigger) -> phase.
//
// Every change of a job's phase goes through NextPhase() or ApplyTransition(); nothing else
// writes JobStatus.job_phase after the job is created. The table itself, kJobTransitions, is below
// so a reader can check the whole lifecycle at a glance. Phases are trainlet's; the Kubeflow
// conditions (Complete, Failed, Suspended) are derived from them by ApplyTransition().
//
// Pure functions, no I/O, no clock (the caller passes the time): safe from any thread.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"
#include "trainlet/v1/operator.pb.h"

namespace trainlet::coordinator {

// The operator API's JobPhase (proto/trainlet/v1/operator.proto), as scoped names the table
// below reads well with: each value is the proto value, so converting is a cast (PhaseOf reads
// it, ApplyTransition writes it). JOB_PHASE_UNSPECIFIED has no name here: PhaseOf reads it as
// Pending.
enum class JobPhase {
  kPending = v1::JOB_PHASE_PENDING,        // stored, waiting for the planner to place the gang
  kStarting = v1::JOB_PHASE_STARTING,      // placed, plans sent, not every rank reported Started
  kRunning = v1::JOB_PHASE_RUNNING,        // every rank of the current attempt reported Started
  kRestarting = v1::JOB_PHASE_RESTARTING,  // the attempt failed; its ranks are stopped, the
                                           // gang waits to be placed again
  kSucceeded = v1::JOB_PHASE_SUCCEEDED,    // terminal: every rank exited 0
  kFailed = v1::JOB_PHASE_FAILED,          // terminal: restart limit reached, deadline exceeded
  kSuspended = v1::JOB_PHASE_SUSPENDED,    // spec.suspend=true: no ranks run until it is resumed
};

enum class JobTrigger {
  kPlaced,              // the planner placed the gang and the plans were sent
  kUnplaceable,         // the planner could not place the gang now; the reason says why
  kAllRanksStarted,     // every rank of the attempt reported Started
  kAllRanksSucceeded,   // every rank of the attempt exited 0
  kAttemptFailed,       // a rank failed or a node was lost, and restarts are left
  kAttemptFailedFinal,  // ... and no restarts are left
  kSuspend,             // spec.suspend became true
  kResume,              // spec.suspend became false
  kDeadlineExceeded,    // spec's active deadline passed
  kPlanRefused,         // the runtime plugin refused to plan the job (its spec does not fit the
                        // runtime, e.g. a variable the runtime owns): no attempt can ever start
};

struct Transition {
  JobPhase from;
  JobTrigger trigger;
  JobPhase to;
};

// The whole lifecycle. A (from, trigger) pair that is not listed is forbidden. Terminal phases
// (Succeeded, Failed) appear in no `from` column. kUnplaceable leaves the phase as it is: it
// only records why the job still waits.
// clang-format off
inline constexpr std::array kJobTransitions = {
    //         from                   trigger                           to
    Transition{JobPhase::kPending,    JobTrigger::kPlaced,              JobPhase::kStarting},
    Transition{JobPhase::kRestarting, JobTrigger::kPlaced,              JobPhase::kStarting},
    Transition{JobPhase::kPending,    JobTrigger::kUnplaceable,         JobPhase::kPending},
    Transition{JobPhase::kRestarting, JobTrigger::kUnplaceable,         JobPhase::kRestarting},
    Transition{JobPhase::kStarting,   JobTrigger::kAllRanksStarted,     JobPhase::kRunning},
    Transition{JobPhase::kStarting,   JobTrigger::kAllRanksSucceeded,   JobPhase::kSucceeded},
    Transition{JobPhase::kRunning,    JobTrigger::kAllRanksSucceeded,   JobPhase::kSucceeded},
    Transition{JobPhase::kStarting,   JobTrigger::kAttemptFailed,       JobPhase::kRestarting},
    Transition{JobPhase::kRunning,    JobTrigger::kAttemptFailed,       JobPhase::kRestarting},
    Transition{JobPhase::kStarting,   JobTrigger::kAttemptFailedFinal,  JobPhase::kFailed},
    Transition{JobPhase::kRunning,    JobTrigger::kAttemptFailedFinal,  JobPhase::kFailed},
    Transition{JobPhase::kPending,    JobTrigger::kSuspend,             JobPhase::kSuspended},
    Transition{JobPhase::kStarting,   JobTrigger::kSuspend,             JobPhase::kSuspended},
    Transition{JobPhase::kRunning,    JobTrigger::kSuspend,             JobPhase::kSuspended},
    Transition{JobPhase::kRestarting, JobTrigger::kSuspend,             JobPhase::kSuspended},
    Transition{JobPhase::kSuspended,  JobTrigger::kResume,              JobPhase::kPending},
    Transition{JobPhase::kPending,    JobTrigger::kDeadlineExceeded,    JobPhase::kFailed},
    Transition{JobPhase::kStarting,   JobTrigger::kDeadlineExceeded,    JobPhase::kFailed},
    Transition{JobPhase::kRunning,    JobTrigger::kDeadlineExceeded,    JobPhase::kFailed},
    Transition{JobPhase::kRestarting, JobTrigger::kDeadlineExceeded,    JobPhase::kFailed},
    Transition{JobPhase::kSuspended,  JobTrigger::kDeadlineExceeded,    JobPhase::kFailed},
    Transition{JobPhase::kPending,    JobTrigger::kPlanRefused,         JobPhase::kFailed},
    Transition{JobPhase::kRestarting, JobTrigger::kPlanRefused,         JobPhase::kFailed},
};
// clang-format on

// "Pending", "Starting", ...: the names the coordinator logs, labels metrics with and accepts as
// a wait condition, and that records written before the enums (JobStatus.phase) hold.
const char* JobPhaseName(JobPhase phase);
// Exact, case-sensitive inverse of JobPhaseName; nullopt for anything else.
std::optional<JobPhase> ParseJobPhase(std::string_view name);
// The phase `status` is in: its job_phase, with JOB_PHASE_UNSPECIFIED (a job just created) read
// as Pending. Stops the process on a value that is not a JobPhase: JobStore refuses such records
// when it reads them (stored_status.h), so one in memory is a broken invariant.
JobPhase PhaseOf(const v1::JobStatus& status);
// True for every value of v1::JobPhase but JOB_PHASE_UNSPECIFIED.
bool IsJobPhase(int value);
// "Placed", "AttemptFailed", ...: the default event reason for a trigger.
const char* JobTriggerName(JobTrigger trigger);

// The phase `trigger` leads to from `from`, or nullopt when the table forbids it.
std::optional<JobPhase> NextPhase(JobPhase from, JobTrigger trigger);
// Succeeded and Failed: no trigger leaves them.
bool IsTerminal(JobPhase phase);

// Kubeflow TrainJob condition types and the reasons trainlet uses for the Suspended condition.
inline constexpr std::string_view kConditionComplete = "Complete";
inline constexpr std::string_view kConditionFailed = "Failed";
inline constexpr std::string_view kConditionSuspended = "Suspended";
inline constexpr std::string_view kReasonSuspended = "Suspended";
inline constexpr std::string_view kReasonResumed = "Resumed";

// At most this many events are kept in JobStatus.events; the oldest are dropped first.
inline constexpr int kMaxJobEvents = 100;

// Sets the condition of `type` to `value` ("True"/"False"), keeping one per type. Its time moves
// only when its status does, as Kubernetes' lastTransitionTime does. For conditions outside the
// phase table (Stalled, job_progress.h); ApplyTransition sets the table's own.
void SetCondition(v1::JobStatus& status, std::string_view type, bool value, std::string_view reason,
                  const std::string& message, int64_t now_ms);
// Appends an event of `type` ("Normal", "Warning"), keeping the last kMaxJobEvents; a repeat of
// the last event only refreshes its time.
void AppendEvent(v1::JobStatus& status, const char* type, const std::string& reason,
                 const std::string& message, int64_t now_ms);

// Moves `status` along the table:
//  - phase := the table's target; reason := `reason` (or the trigger's name when empty);
//  - appends a JobEvent (type Warning for failures, Normal otherwise), keeping the last
//    kMaxJobEvents;
//  - conditions, one per type, as Kubeflow sets them: Succeeded -> Complete=True,
//    Failed -> Failed=True, Suspended -> Suspended=True, resumed -> Suspended=False with reason
//    "Resumed". A condition's unix_ms changes only when its status does (lastTransitionTime).
// An unset status.job_phase counts as Pending (a job just created). Attempts, ranks and
// placement are the caller's to update. Returns Invalid and leaves `status` untouched when the
// table forbids the move; stops on a job_phase that is not a phase (see PhaseOf).
Status ApplyTransition(v1::JobStatus& status, JobTrigger trigger, std::string reason,
                       std::string message, int64_t now_ms);

}  // namespace trainlet::coordinator
