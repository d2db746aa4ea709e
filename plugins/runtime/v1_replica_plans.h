// What the runtime plugins share for jobs converted from the Training Operator's kinds
// (common/trainjob/v1_job.h): the V1JobContract in a TrainJob's annotations says which replica
// each rank is. Each replica runs as one process on its own node of the gang (rank = node rank),
// as the Training Operator runs it as one pod, with its own command and container env, and the
// env its framework's plugin computes for it (which wins, as the operator's entries come after
// the container's in a pod).
//
// Pure functions; called from the coordinator's loop through the plugins.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "common/trainjob/v1_job.h"
#include "trainlet/runtime_plugin.h"

namespace trainlet {

using EnvList = std::vector<std::pair<std::string, std::string>>;

// One replica as a rank.
struct ReplicaRank {
  const trainjob::V1Replica* replica = nullptr;
  uint32_t index = 0;  // among the replicas of its type: the Training Operator's replica index
  uint32_t rank = 0;   // in the contract's order of types, then index; also the node rank
};

// Every replica of `contract`, in rank order.
std::vector<ReplicaRank> ReplicaRanks(const trainjob::V1JobContract& contract);
// The ranks of replica type `type`, in index order.
std::vector<ReplicaRank> RanksOfType(const std::vector<ReplicaRank>& ranks, std::string_view type);

// The contract of `request` when its job was converted from `kind`; nullopt for a TrainJob (no
// annotation). Invalid when the annotation is malformed or names another kind.
Result<std::optional<trainjob::V1JobContract>> ContractOf(const PlanRequest& request,
                                                          trainjob::V1Kind kind);

// One rank on each placed node, `ports[n]` ports reserved on node n (missing entries: 0).
// Invalid when the placement is not one node per replica.
Result<AttemptLayout> LayOutReplicas(const PlanRequest& request,
                                     const trainjob::V1JobContract& contract,
                                     const std::vector<uint32_t>& ports);

// What the env of one replica is computed from.
struct ReplicaContext {
  const PlanRequest& request;
  const trainjob::V1JobContract& contract;
  const std::vector<ReplicaRank>& ranks;  // all, in rank order
  const ReplicaRank& me;
  // The advertised address of the node of rank `rank`.
  const std::string& Address(uint32_t rank) const { return request.nodes[rank].address; }
};
using ReplicaEnv = std::function<Result<EnvList>(const ReplicaContext&)>;

// The plans: each node's one worker runs its replica's argv, with the trainer env and TRAINLET_*
// variables (AddCommonWorkerEnv), then its replica's container env, then `env`'s.
Result<std::vector<v1::LaunchPlan>> MakeReplicaPlans(const PlanRequest& request,
                                                     const trainjob::V1JobContract& contract,
                                                     const AttemptLayout& layout,
                                                     const ReplicaEnv& env);

}  // namespace trainlet
