// The rules of one job's lifecycle that need neither the job map nor the loop: the restart limit
// and backoff, the active deadline and the start timeout, which ranks have ended, and the spec
// and status edits of a suspend or resume. JobController applies them to its jobs.
//
// Pure functions (StoreSuspend aside, which only writes what it is given): no clock, the caller
// passes the time; safe from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"
#include "common/trainjob/trainjob_model.h"
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

// A change of spec.suspend, prepared in full before anything is stored or sent.
struct SuspendFlip {
  std::string job;  // its name
  bool suspend = false;
  std::string spec_yaml;  // the spec as it reads after the change
  v1::JobStatus status;   // the status after the change
};
// The flip of the job whose status is `status` to `suspend`, its spec then reading `spec_yaml`.
// A suspend ends the current attempt "Stopped" (no restart is used up). Invalid when the job has
// finished or is being deleted. `how` says who asked, for the event.
Result<SuspendFlip> PrepareSuspend(const v1::JobStatus& status, bool suspend, std::string spec_yaml,
                                   const std::string& how, int64_t now_ms);
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
