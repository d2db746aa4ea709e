// The rules of one job's lifecycle that need neither the job map nor the loop: the restart limit
// and backoff, the active deadline and the start timeout, which ranks have ended, the spec and
// status edits of a suspend, a resume or a preemption, and the warning a job's ranks get before
// a stop they did not ask for. JobController applies them to its jobs.
//
// Pure functions (StoreSuspend aside, which only writes what it is given): no clock, the caller
// passes the time; safe from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"
#include "common/trainjob/trainjob_model.h"
#include "coordinator/agent_commands.h"
#include "coordinator/job_store.h"
#include "coordinator/rank_state_machine.h"
#include "trainlet/v1/operator.pb.h"

namespace trainlet::coordinator {

// A TrainJob annotation overriding the runtime's failurePolicy.maxRestarts for that job.
inline constexpr std::string_view kMaxRestartsAnnotation = "trainlet.io/max-restarts";
inline constexpr long kMaxRestartsLimit = 1000;  // the largest value the annotation accepts

// How many times a failed attempt of `job` may be restarted: the annotation when set, else the
// runtime's failurePolicy.maxRestarts (0 when absent). Invalid, naming the annotation, unless
// its value is a plain integer from 0 to kMaxRestartsLimit.
Result<uint32_t> RestartLimit(const trainjob::TrainJob& job,
                              const trainjob::TrainingRuntime& runtime);
// The delay before restart number `restarts_used + 1`: `first`, doubled for each restart used,
// at most `max`.
std::chrono::milliseconds RestartBackoff(uint32_t restarts_used, std::chrono::milliseconds first,
                                         std::chrono::milliseconds max);

// What RestartHoldMs adds on top of the graces: the step's check interval (0.2 s), a heartbeat's
// worth of timing between the node's last beat and its last stamp, and scheduling slack.
inline constexpr int64_t kRestartHoldMarginMs = 1500;
// The earliest moment a job whose ranks ran on a node that went silent (last heard at
// `last_heard_ms`) may be placed again. Until then the old ranks may still run: the node's agent
// (or, for an agent that is stopped or hung, its steps) stops them only after the partition
// grace, with SIGTERM, and SIGKILLs them after the stop grace. Two attempts of a job must never
// run at once, so the hold covers both graces and a margin (issue 19, defect 2).
int64_t RestartHoldMs(int64_t last_heard_ms, std::chrono::milliseconds partition_grace,
                      uint32_t stop_grace_ms);

// True once a rank has ended (Succeeded, Failed, StartFailed, Lost, Stopped). A rank that has not
// ended holds its node's slot and its job's resources there, whatever its job's phase.
bool RankEnded(const v1::RankStatus& rank);

// When `spec`'s activeDeadlineSeconds runs out, counted from `created_unix_ms`; INT64_MAX for
// none (or one too far away to count).
int64_t ActiveDeadlineMs(const trainjob::TrainJob& spec, int64_t created_unix_ms);
// When the current attempt of `status` fails for not starting: `start_timeout` after it was
// placed, while it is Starting with a rank Pending; INT64_MAX when it cannot.
int64_t StartDeadlineMs(const v1::JobStatus& status, std::chrono::milliseconds start_timeout);
// Closes the record of the current attempt with `result` and `cause`, unless it already ended.
void EndAttemptRecord(v1::JobStatus& status, AttemptTrigger result, const std::string& cause,
                      int64_t now_ms);

// When a job that finished at `finished_ms` is deleted: `runtime`'s ttlSecondsAfterFinished when
// it sets one, else `default_ttl`; 0 when neither does (the job is kept).
int64_t TtlDeleteMs(const trainjob::TrainingRuntime& runtime,
                    std::optional<std::chrono::seconds> default_ttl, int64_t finished_ms);
// Every node that ran a rank of any attempt of the job whose status is `status` (the attempts'
// rank_nodes and the current ranks' nodes), sorted, each once: where its data lies.
std::vector<std::string> NodesThatRan(const v1::JobStatus& status);

// StopWarning (agent_commands.h): the warning a job's ranks get before a stop they did not ask
// for (a preemption, drain --force) and before their active deadline.

// TrainJob annotations setting the warning: the signal (SIGUSR2, USR2 or 12) and the grace in
// whole seconds. Without them: SIGUSR1 and the coordinator's preemption_grace_seconds.
inline constexpr std::string_view kPreemptionSignalAnnotation = "trainlet.io/preemption-signal";
inline constexpr std::string_view kPreemptionGraceAnnotation =
    "trainlet.io/preemption-grace-seconds";
inline constexpr long kMaxPreemptionGraceSeconds = 86400;  // the largest grace accepted
inline constexpr uint32_t kDefaultPreemptionGraceSeconds = 30;
// The phase reason and Suspended condition reason of a preempted job (Kueue's word).
inline constexpr std::string_view kReasonPreempted = "Preempted";

// The warning of `job`: its annotations when set, else SIGUSR1 and `default_grace`. The signal
// is a name with or without "SIG" (case-insensitive), or its number on this host; SIGKILL and
// SIGSTOP, which no rank can catch, are refused. Invalid, naming the annotation, otherwise; also
// when trainlet.io/deadline-warning is set to anything but "true" or "false".
Result<StopWarning> StopWarningOf(const trainjob::TrainJob& job,
                                  std::chrono::milliseconds default_grace);
// StopWarningOf for a job whose annotations were checked at apply (BuildJobEntry): one that no
// longer parses gives SIGUSR1 and `default_grace`.
StopWarning JobStopWarning(const trainjob::TrainJob& job, std::chrono::milliseconds default_grace);
// "SIGUSR1", or "signal 40" for one without a name here.
std::string SignalName(int signal);
// "SIGUSR1 sent to every rank; SIGTERM in 30 s" (`why` appended in parentheses when not empty):
// the message of the Warning event a warning records.
std::string WarningMessage(const StopWarning& warning, const std::string& why);

// Whether a job's ranks get its warning before its activeDeadlineSeconds: the annotation's
// "true" or "false" when set (checked at apply, StopWarningOf), else the coordinator's
// deadline_warning (on unless an operator turns it off); a job that sets either annotation above
// is warned even when the coordinator's default is off.
inline constexpr std::string_view kDeadlineWarningAnnotation = "trainlet.io/deadline-warning";
bool DeadlineWarningWanted(const trainjob::TrainJob& job, bool by_default);

// When the warning before `spec`'s active deadline is due for a job whose status is `status`:
// the deadline less the warning's grace, but never earlier than half-way to the deadline (a 30 s
// grace must not signal a job with a 20 s deadline at its start). Only when `wanted`
// (DeadlineWarningWanted), while an attempt runs (Starting or Running) that was not warned yet
// (JobStatus.deadline_warned_attempt); INT64_MAX otherwise.
int64_t DeadlineWarningMs(const trainjob::TrainJob& spec, const v1::JobStatus& status,
                          const StopWarning& warning, bool wanted);
// True while the current attempt of the job whose status is `status` has had its deadline
// warning: however it ends from then on, the deadline ended it (job_lifecycle.cpp).
inline bool DeadlineWarned(const v1::JobStatus& status) {
  return status.attempt() != 0 && status.deadline_warned_attempt() == status.attempt();
}

// What the ranks of the next attempt of a job whose status is `status` are told about the one
// before it: TRAINLET_RESTART_REASON (preempted, failed or suspended) from the second attempt on,
// and TRAINLET_PREEMPTED=1 on the first attempt after a preemption (status.preempted). Empty for
// a first attempt that follows no preemption.
std::vector<std::pair<std::string, std::string>> RestartEnv(const v1::JobStatus& status);

// A change of spec.suspend, prepared in full before anything is stored or sent.
struct SuspendFlip {
  std::string job;  // its name
  bool suspend = false;
  std::string spec_yaml;  // the spec as it reads after the change
  v1::JobStatus status;   // the status after the change
  StopWarning warning;    // sent before the SIGTERM of the stop (a preemption's); none: at once
};
// The flip of the job whose status is `status` to `suspend`, its spec then reading `spec_yaml`.
// A suspend ends the current attempt "Stopped" (no restart is used up). Invalid when the job has
// finished or is being deleted. `how` says who asked, for the event.
Result<SuspendFlip> PrepareSuspend(const v1::JobStatus& status, bool suspend, std::string spec_yaml,
                                   const std::string& how, int64_t now_ms);
// A preemption of the job whose status is `status` (its spec then reading `spec_yaml`, with
// suspend: true), as Kueue's: the job is suspended and requeued, not failed. The current attempt
// ends "Stopped" with cause "preempted by <by>" (no restart is used up), preemptions goes up,
// preempted is set (the next attempt's ranks get TRAINLET_PREEMPTED=1), the phase is Suspended
// with reason and condition reason "Preempted", and the events read "Preempted by <by>" and,
// when ranks run, a Warning "PreemptionWarning" (WarningMessage). `by` names the preemptor, e.g.
// "team-a/llm-7 (priority 1000)". Invalid when the job has finished, is being deleted or is
// suspended already.
Result<SuspendFlip> PreparePreemption(const v1::JobStatus& status, std::string spec_yaml,
                                      const std::string& by, const StopWarning& warning,
                                      int64_t now_ms);
// Apply's answer for a TrainJob whose name is taken by `stored` (whose spec says
// `stored_suspend`): nullopt when `applied` is the stored spec (unchanged), a flip when it
// differs only in spec.suspend, kExists for any other change. `source` names the file.
Result<std::optional<SuspendFlip>> CompareWithStored(const JobRecord& stored, bool stored_suspend,
                                                     const trainjob::TrainJob& applied,
                                                     const std::string& source, int64_t now_ms);
// The TrainJob document `yaml` with spec.suspend set to `suspend`.
Result<std::string> WithSuspend(const std::string& yaml, bool suspend);
// Writes the flip's spec and status; the caller holds a store transaction.
Status StoreSuspend(JobStore& store, const SuspendFlip& flip);

}  // namespace trainlet::coordinator
