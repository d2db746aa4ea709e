// The body of a progress POST, as Kubeflow Trainer defines it (UpdateTrainJobStatusRequest):
//
//   {"trainerStatus": {"progressPercentage": 45, "estimatedRemainingSeconds": 795649,
//                      "metrics": [{"name": "loss", "value": "0.2347"}],
//                      "lastUpdatedTime": "2025-01-23T10:30:45Z"}}
//
// with Kubeflow's limits: progressPercentage an integer 0..100, estimatedRemainingSeconds an
// integer 0..2^31-1, at most 256 metrics, each name and value a string of 1 to 64 characters,
// lastUpdatedTime RFC 3339. Every field is optional, null reads as absent, and unknown fields are
// ignored, as Go's decoder does on Kubeflow's side.
//
// The bytes come from a rank, so they are untrusted: any input gives a value or an error, never
// a crash (fuzz/progress_body_fuzz.cpp). Pure; any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "common/status.h"
#include "trainlet/v1/progress.pb.h"

namespace trainlet::agent {

inline constexpr size_t kMaxProgressMetrics = 256;
inline constexpr size_t kMaxMetricTextBytes = 64;

// How the JSON is read: kSubsetFirst tries ScanJsonSubset (json_subset_scanner.h: the plain JSON
// posts are, without nlohmann's lexer), then nlohmann's SAX parser when the body is outside that
// subset; kFullParserOnly skips the first (tests and the fuzzer check both give one result).
enum class ProgressJsonParser { kSubsetFirst, kFullParserOnly };

// The trainerStatus of `body`: nullopt when the body has none (Kubeflow answers 200 and changes
// nothing). kInvalid naming the field ("trainerStatus.metrics[3].value: must be a string") for a
// body that breaks a rule above. last_updated_unix_ms is 0 when the body gave no time; received
// and attempt are left for the caller.
Result<std::optional<v1::TrainerStatus>> ParseProgressBody(
    std::string_view body, ProgressJsonParser parser = ProgressJsonParser::kSubsetFirst);

// RFC 3339 ("2025-01-23T10:30:45Z", "...45.123+02:00") to milliseconds since the epoch.
std::optional<int64_t> ParseRfc3339Ms(std::string_view text);

}  // namespace trainlet::agent
