// A runtime's JobSet failurePolicy.rules and ttlSecondsAfterFinished, read and checked as JobSet's
// admission webhook checks them (the CRD schema, checked first, only knows the types and the
// action enum):
//   - a rule's name matches ^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$, at most 128 characters,
//     and no two rules share one;
//   - each of onJobFailureReasons is a Kubernetes Job failure reason (kJobFailureReasons);
//   - each of targetReplicatedJobs names a replicatedJob of the same template;
//   - each of onJobFailureMessagePatterns is a regular expression (ECMAScript here, RE2 in
//     JobSet: the common subset behaves the same).
// What trainlet's failures are, as Kubernetes Job failure reasons, and what each rule does, is
// the coordinator's (coordinator/failure_rules.h) and docs/runtimes.md's "Failure rules".
//
// Pure; any thread.
#pragma once

#include <array>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "common/trainjob/trainjob_model.h"
#include "common/trainjob/yaml_support.h"

namespace trainlet::trainjob {

// The reasons Kubernetes' Job controller sets on a failed Job (batch/v1 JobReasonX).
inline constexpr std::string_view kReasonBackoffLimitExceeded = "BackoffLimitExceeded";
inline constexpr std::string_view kReasonDeadlineExceeded = "DeadlineExceeded";
inline constexpr std::array<std::string_view, 5> kJobFailureReasons = {
    kReasonBackoffLimitExceeded, kReasonDeadlineExceeded, "PodFailurePolicy", "FailedIndexes",
    "MaxFailedIndexesExceeded"};

// The JobSet actions (the CRD's enum) trainlet acts on; RestartJob and
// RestartJobAndIgnoreMaxRestarts are read as the last two (ReadFailurePolicy warns).
inline constexpr std::string_view kActionFailJobSet = "FailJobSet";
inline constexpr std::string_view kActionRestartJobSet = "RestartJobSet";
inline constexpr std::string_view kActionRestartIgnoringMax = "RestartJobSetAndIgnoreMaxRestarts";

// The TrainJob annotation choosing the exit-code rule (coordinator/failure_rules.h): "ExitCode",
// as a Training Operator v1 replica's restartPolicy: ExitCode (which v1_conversion maps onto it),
// or "OnFailure" (the default).
inline constexpr std::string_view kRestartPolicyAnnotation = "trainlet.io/restart-policy";

// The message Kubernetes' Job controller writes beside `reason` ("Job has reached the specified
// backoff limit"); "" for a reason it has none for here.
std::string_view JobFailureMessage(std::string_view reason);

// Reads failurePolicy.rules and ttlSecondsAfterFinished of `jobset` (a runtime's
// spec.template.spec) into `rt`, whose replicated_jobs are read already. Warnings go to `warn`
// (the field's path, what about it). Errors (kInvalid) name `label` ("ClusterTrainingRuntime/x")
// and the path:
//   "ClusterTrainingRuntime/x: spec.template.spec.failurePolicy.rules[1].targetReplicatedJobs[0]:
//    no replicatedJob \"trainer\" in this template (replicatedJobs: node)"
using WarnFn = std::function<void(const std::string& path, const std::string& what)>;
Status ReadFailurePolicy(const YAML::Node& jobset, const std::string& label, TrainingRuntime* rt,
                         const WarnFn& warn);

}  // namespace trainlet::trainjob
