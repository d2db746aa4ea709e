// The env every worker gets, whatever its runtime (DESIGN.md "The life of a job", step 4).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "trainlet/runtime_plugin.h"

namespace trainlet {

struct RankCoordinates {
  uint32_t rank;
  uint32_t local_rank;
  uint32_t node_rank;
  uint32_t world_size;
  uint32_t local_world_size;
};

// Adds the trainer env (in order; later entries win) and then the TRAINLET_* variables, which
// the user's env cannot override.
void AddCommonWorkerEnv(const PlanRequest& request, const RankCoordinates& at,
                        v1::WorkerSpec& worker);

// Parses a positive integer count for `field`; "" gives `fallback`.
Result<uint32_t> ParseProcCount(std::string_view text, std::string_view field, uint32_t fallback);

}  // namespace trainlet

namespace trainlet {

// Helpers the framework plugins (torch, jax, xgboost, mlx) share. All are pure functions of their
// arguments.

// One plan per node of `request`, in node-rank order, with the job, attempt, node rank and stop
// grace set and no workers yet.
std::vector<v1::LaunchPlan> EmptyPlans(const PlanRequest& request);

// "address:port"; an IPv6 address is put in brackets ("[fd00::1]:29500").
std::string HostPort(std::string_view address, uint32_t port);

// The `index`th port the agent of node `node_rank` reserved for this attempt. When it is missing
// (no reservation yet, or fewer ports than asked), an Invalid error naming `what` (the variable
// that needs it, e.g. "MASTER_PORT") and the node; never a made-up port.
Result<uint32_t> ReservedPort(const PlanRequest& request, uint32_t node_rank, uint32_t index,
                              std::string_view what);

// numProcPerNode "auto" on a node, as Kubeflow counts it: the node's GPUs, or when it has none its
// CPUs (hardware threads, else cores), at least 1.
uint32_t AutoProcsPerNode(const v1::Topology& topology);

// Processes per node for each node of `request`: `num_proc_per_node` parsed for `field` ("" is 1),
// and "auto" resolved from each node's topology by AutoProcsPerNode (so nodes may differ).
Result<std::vector<uint32_t>> ProcsOfNodes(const PlanRequest& request, std::string_view field);

// The global rank of local rank 0 on each node, for per-node counts `procs`, and their sum.
struct RankLayout {
  std::vector<uint32_t> procs;       // per node
  std::vector<uint32_t> first_rank;  // per node
  uint32_t world_size = 0;
};
RankLayout LayOutRanks(const std::vector<uint32_t>& procs);

// The AttemptLayout of `procs[n]` ranks on node n, numbered in node-rank order (node n's first
// rank is the sum of the counts before it), asking for no ports and no exec launcher.
AttemptLayout RanksInNodeOrder(const std::vector<uint32_t>& procs);

// The number of ranks `layout` lays out over all its nodes.
uint32_t WorldSize(const AttemptLayout& layout);

// RDMA (ibverbs) device names of a node: PlacedNode::rdma_devices when the coordinator filled it,
// else the verbs names among the OS devices of the node's topology NICs ("mlx5_0", "rdma_en2";
// network interface names such as "eth0" or "ib0" are not verbs devices).
std::vector<std::string> RdmaDevices(const PlacedNode& node);
// True for a name of an ibverbs device ("mlx5_0", "rdma_en3", "efa_0", "rxe0", ...).
bool IsVerbsDeviceName(std::string_view name);

// Refuses trainer env (the runtime's and the TrainJob's, merged) that sets a variable the plugin
// owns: Invalid, naming the variable ("spec.trainer.env: DMLC_TRACKER_URI is reserved for the
// xgboost runtime"), as Kubeflow's xgboost plugin forbids them. Plugins that do not call this
// simply override such entries.
Status CheckReservedEnv(const PlanRequest& request, std::string_view runtime,
                        const std::vector<std::string_view>& reserved);

}  // namespace trainlet
