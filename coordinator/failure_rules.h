// FailureRules: what follows a failed attempt, by the runtime's JobSet failurePolicy.rules and the
// job's trainlet.io/restart-policy annotation: fail the job now, restart it counting against
// maxRestarts, or restart it without counting.
//
// How trainlet's failures read as Kubernetes Job failures (JobSet's rules match those): every
// trainlet job's Job has backoffLimit 0 per pod, so a rank or step worker that exits non-zero, is
// killed by a signal, cannot start, or is lost with its node fails its Job with reason
// BackoffLimitExceeded ("Job has reached the specified backoff limit"). activeDeadlineSeconds is
// the whole TrainJob's, counted from its creation: it fails the job without asking the rules
// (a restart could not run anyway), so DeadlineExceeded never reaches them. docs/runtimes.md,
// "Failure rules", says the same for users.
//
// Pure functions; any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "common/trainjob/failure_policy.h"
#include "common/trainjob/trainjob_model.h"
#include "trainlet/v1/operator.pb.h"

namespace trainlet::coordinator {

// The TrainJob annotation choosing the exit-code rule, as the Training Operator v1's replica
// restartPolicy: ExitCode ("ExitCode"), or the default ("OnFailure": every failure restarts while
// maxRestarts allows).
inline constexpr std::string_view kRestartPolicyAnnotation = trainjob::kRestartPolicyAnnotation;
enum class RestartPolicy { kOnFailure, kExitCode };
// The restart policy of `job`: OnFailure without the annotation. Invalid, naming the annotation,
// for any value but ExitCode and OnFailure.
Result<RestartPolicy> RestartPolicyOf(const trainjob::TrainJob& job);

// What failed, as trainlet saw it.
struct AttemptFailure {
  enum class Kind {
    kExited,       // a rank or step worker exited non-zero (exit_code)
    kSignaled,     // a rank or step worker was killed by a signal (signal)
    kStartFailed,  // a rank or step worker could not start
    kOther,        // no one worker: its node was lost or drained, a start timeout, a port error
  };
  Kind kind = Kind::kOther;
  // The replicatedJob of the failed worker (ReplicatedJobOf); "" for kOther.
  std::string replicated_job;
  // kOther: the replicatedJobs whose workers it took down (a lost or drained node fails the Jobs
  // of every replicated job with a pod there, as in JobSet; a start timeout fails those of the
  // workers that never started; a node that could not reserve its ports, those of its workers).
  // A rule with targetReplicatedJobs matches when it names one of them; none (a failure that
  // hit no worker): only rules without targets match.
  std::vector<std::string> replicated_jobs;
  int32_t exit_code = 0;
  int32_t signal = 0;
  std::string message;  // trainlet's cause: "rank 1 on node-b exited with code 1"
};

// The replicatedJob a rank belongs to: its step ("dataset-initializer"), "node" for the ranks of
// the training itself (RankStatus.step "").
std::string ReplicatedJobOf(const v1::RankStatus& rank);
// The failure of `rank`, which ended Failed or StartFailed; `message` is the attempt's cause.
AttemptFailure FailureOfRank(const v1::RankStatus& rank, std::string message);
// A failure of no one worker (kOther) that took down the ranks of `status` that `took(rank)`
// says it did, on any node, with their replicated jobs (each once, in rank order).
AttemptFailure FailureOfRanks(const v1::JobStatus& status,
                              const std::function<bool(const v1::RankStatus&)>& took,
                              std::string message);
// FailureOfRanks of the ranks on `node` that `took(rank)` says it took down.
AttemptFailure FailureOnNode(const v1::JobStatus& status, const std::string& node,
                             const std::function<bool(const v1::RankStatus&)>& took,
                             std::string message);

struct FailureDecision {
  enum class Action {
    kFail,               // the job fails now
    kRestart,            // restart; counts against maxRestarts
    kRestartNotCounted,  // restart; does not count (RestartJobSetAndIgnoreMaxRestarts)
  };
  Action action = Action::kFail;
  // The rule that fired, as AttemptRecord.failure_rule keeps it: "failOnUserError
  // (FailJobSet)", "ExitCode (permanent exit code 3)"; "" when none matched (the default:
  // RestartJobSet).
  std::string rule;
  bool limit_reached = false;  // kFail because the restarts were used up, not by a rule
  std::string reason;          // the Kubernetes Job failure reason of the failure
};

// Decides what follows `failure`, `restarts_used` of `max_restarts` used before it. In order:
//   1. with RestartPolicy::kExitCode, an exit code 1-127 is permanent: fail now (128-255, signals,
//      start failures and kOther are retried, as the rules below say);
//   2. the first of `rules` that matches (every list it sets matches: the reason among
//      onJobFailureReasons, the replicated job among targetReplicatedJobs, a pattern of
//      onJobFailureMessagePatterns found in the Job's message or in failure.message) decides;
//   3. none matches: RestartJobSet.
// RestartJobSet fails the job instead once restarts_used reaches max_restarts (limit_reached).
FailureDecision DecideFailure(const std::vector<trainjob::FailureRule>& rules, RestartPolicy policy,
                              const AttemptFailure& failure, uint32_t restarts_used,
                              uint32_t max_restarts);

// How many of the ended attempts in `status` before the current (last) one used up a restart:
// failed ones, less those a RestartJobSetAndIgnoreMaxRestarts rule restarted and those that
// failed for the infrastructure (AttemptRecord.infrastructure: a plan that never reached its
// node, a lost node).
uint32_t RestartsUsed(const v1::JobStatus& status);

}  // namespace trainlet::coordinator
