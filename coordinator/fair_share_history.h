// Fair sharing's usage history in the store (issue 14: "queues, quotas, usage and admissions
// survive a coordinator restart"). JobAdmitter decays each ClusterQueue's past usage so that a
// group that used less recently gets the next free quota; kept only in memory, a restart (or a
// failover to another coordinator) forgot who had used what, and the group that had just held the
// whole cohort was first in line again.
//
// The history is one cluster value (JobStore::GetClusterValue) under kFairShareHistoryKey,
// encoded as JSON:
//   {"version":1,"queues":[{"clusterQueue":"a","asOfMs":1764000000000,"usage":{"cpu":1.5e3}}]}
// written by JobController at most every kFairShareHistoryWriteMs (so a crash loses at most that
// much history, which decays with a half-life of minutes anyway). Pure functions; any thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "coordinator/admission_types.h"

namespace trainlet::coordinator {

inline constexpr const char* kFairShareHistoryKey = "fair-share-history";
inline constexpr int64_t kFairShareHistoryWriteMs = 10'000;

std::string EncodeUsageHistory(const std::vector<admission::UsageHistory>& history);

// kInvalid naming what is wrong (not JSON, another version, a field of the wrong type, a
// negative or non-finite usage); "" decodes to an empty history.
Result<std::vector<admission::UsageHistory>> DecodeUsageHistory(const std::string& bytes);

}  // namespace trainlet::coordinator
