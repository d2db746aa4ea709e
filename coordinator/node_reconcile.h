// NodeReconcile: what to do with the workers a (re-)registering node reports running, as a pure
// step JobController applies.
//
// A worker of a live attempt (Starting or Running) whose rank is placed on that node and still
// Pending is adopted: the node started it while the coordinator was not looking (its Started
// event was lost with a restart). A worker of any other attempt, or of a job that is gone, must
// not run: its (job, attempt) is to be stopped. A worker of a live attempt whose rank is already
// past Pending, or placed elsewhere, changes nothing.
//
// Any thread; no state. The caller owns the statuses and applies the answer.
#pragma once

#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "trainlet/v1/envelope.pb.h"

namespace trainlet::coordinator {

struct NodeReconcile {
  struct Adoption {
    std::string job;
    int rank_index = 0;  // index into the job status's ranks
    int32_t pid = 0;     // as the node reported it
  };
  std::vector<Adoption> adopt;                      // in the order the node reported them
  std::set<std::pair<std::string, uint32_t>> stop;  // (job, attempt) to stop on the node
};

// The status of `job` when `attempt` is its live attempt; null when it is not (or the job is gone).
using LiveAttemptLookup =
    std::function<const v1::JobStatus*(const std::string& job, uint32_t attempt)>;

NodeReconcile ReconcileRunning(const std::string& node,
                               const google::protobuf::RepeatedPtrField<v1::RunningWorker>& running,
                               const LiveAttemptLookup& live);

}  // namespace trainlet::coordinator
