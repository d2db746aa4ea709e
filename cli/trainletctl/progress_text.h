// How trainletctl shows a job's training progress (JobStatus.trainer_status, Kubeflow's
// trainerStatus): the PROGRESS and ETA columns of `get trainjobs`, the Progress section of
// `describe trainjob`, and the `trainerStatus` object of -o json|yaml under Kubeflow's field
// names (progressPercentage, estimatedRemainingSeconds, metrics[{name, value}], lastUpdatedTime
// as RFC 3339), so a script written for `kubectl get trainjob -o json` reads it unchanged.
//
// Pure functions: safe from any thread.
#pragma once

#include <cstdint>
#include <string>

#include "trainlet/v1/operator.pb.h"

namespace trainlet::cli {

// "42%", or "-" when the current attempt reported no percentage.
std::string ProgressColumn(const v1::JobStatus& job);
// "3m10s" (Go's duration form, whole seconds), or "-" when no estimate was reported.
std::string EtaColumn(const v1::JobStatus& job);
// The describe lines for the job's progress ("" when none was reported): percentage, remaining
// time, when it was received (its age at `now_ms`), and the metrics as a table.
std::string DescribeProgress(const v1::JobStatus& job, int64_t now_ms);
// "2026-11-24T14:30:05Z" (RFC 3339, UTC, whole seconds).
std::string Rfc3339(int64_t unix_ms);
// `json` (the proto3 JSON of a JobList, proto::ToJson) with each job's trainerStatus in
// Kubeflow's shape. Returned unchanged when no job has a trainerStatus.
std::string WithKubeflowTrainerStatus(const std::string& json, const v1::JobList& jobs);

}  // namespace trainlet::cli
