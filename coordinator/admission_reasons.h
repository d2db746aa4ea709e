// The words of admission: quantities and the messages a waiting or preempted workload shows.
//
// Messages are built here only, so `describe trainjob` reads the same whatever rule produced
// them. Pure functions, safe from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace trainlet::coordinator::admission {

// A quantity in Kubernetes' spelling: cpu from millicores ("500m", "4"), memory from bytes
// ("8Gi", "1536Mi", "1000"), everything else as a plain count.
std::string FormatAmount(std::string_view resource, int64_t amount);

// "team-a/llm-7": what users type and see for a workload (a job key is not for people).
std::string WorkloadName(std::string_view namespace_, std::string_view key);

// "Preempted by team-a/llm-7 (priority 1000)".
std::string PreemptedByMessage(std::string_view preemptor_name, int32_t priority);

// A ClusterQueue of the cohort above its nominal quota in the slot: "8 borrowed by team-b".
struct Borrower {
  std::string cluster_queue;
  int64_t amount = 0;
};

// "waiting for 4 nvidia.com/gpu in ClusterQueue team-a, 0 free, 8 borrowed by team-b";
// `flavor` is named when not empty ("4 nvidia.com/gpu of flavor h100").
std::string WaitingForQuotaMessage(std::string_view resource, std::string_view flavor, int64_t need,
                                   std::string_view cluster_queue, int64_t free,
                                   const std::vector<Borrower>& borrowers);

// "can never fit: needs 64 nvidia.com/gpu, ClusterQueue team-a can reach at most 16 with
// borrowing" (without borrowing: "... has at most 16").
std::string NeverFitsMessage(std::string_view resource, std::string_view flavor, int64_t need,
                             std::string_view cluster_queue, int64_t potential,
                             bool with_borrowing);

}  // namespace trainlet::coordinator::admission
