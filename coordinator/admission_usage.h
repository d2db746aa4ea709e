// What `trainletctl get clusterqueues` and the queue metrics show: per ClusterQueue, the
// admitted and pending workloads and, per flavor and resource, the quota and what admitted
// workloads use of it. Also what AdvanceUsageHistory (admission_order.h) takes as `current`.
// Pure functions of a snapshot (the same AdmissionInputs a pass takes); safe from any thread.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "coordinator/admission_types.h"

namespace trainlet::coordinator::admission {

struct FlavorResourceUsage {
  std::string flavor, resource;
  int64_t nominal = 0;
  std::optional<int64_t> borrowing_limit, lending_limit;
  int64_t used = 0;      // by the ClusterQueue's admitted workloads
  int64_t borrowed = 0;  // the part of `used` above nominal
};

struct ClusterQueueUsage {
  std::string name, cohort;
  int64_t admitted = 0;                    // admitted workloads charged to it
  int64_t pending = 0;                     // pending workloads whose LocalQueue leads to it
  std::vector<FlavorResourceUsage> usage;  // in the ClusterQueue's resource group order
};

// One entry per ClusterQueue, in input order. A pending workload without a queue label counts
// in the default LocalQueue's ClusterQueue when the config names one.
std::vector<ClusterQueueUsage> UsageByClusterQueue(const AdmissionInputs& state);

// ClusterQueue -> resource -> amount in use (summed over flavors), for AdvanceUsageHistory.
std::map<std::string, std::map<std::string, int64_t>> CurrentUsage(
    const std::vector<ClusterQueueUsage>& usage);

}  // namespace trainlet::coordinator::admission
