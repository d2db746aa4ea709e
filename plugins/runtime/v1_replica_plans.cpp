#include "plugins/runtime/v1_replica_plans.h"

#include "plugins/runtime/worker_env.h"

namespace trainlet {

std::vector<ReplicaRank> ReplicaRanks(const trainjob::V1JobContract& contract) {
  std::vector<ReplicaRank> out;
  for (const auto& r : contract.replicas) {
    for (int32_t i = 0; i < r.replicas; ++i) {
      out.push_back({&r, static_cast<uint32_t>(i), static_cast<uint32_t>(out.size())});
    }
  }
  return out;
}

std::vector<ReplicaRank> RanksOfType(const std::vector<ReplicaRank>& ranks, std::string_view type) {
  std::vector<ReplicaRank> out;
  for (const auto& r : ranks) {
    if (r.replica->type == type) out.push_back(r);
  }
  return out;
}

Result<std::optional<trainjob::V1JobContract>> ContractOf(const PlanRequest& request,
                                                          trainjob::V1Kind kind) {
  TRAINLET_ASSIGN_OR_RETURN(auto contract, trainjob::V1ContractOf(request.annotations));
  if (contract && contract->kind != kind) {
    return InvalidError("metadata.annotations[" + std::string(trainjob::kV1JobAnnotation) +
                        "]: a " + trainjob::V1KindName(contract->kind) + " cannot run on the " +
                        trainjob::V1KindName(kind) + "'s runtime");
  }
  return contract;
}

Result<AttemptLayout> LayOutReplicas(const PlanRequest& request,
                                     const trainjob::V1JobContract& contract,
                                     const std::vector<uint32_t>& ports) {
  const auto replicas = static_cast<size_t>(contract.TotalReplicas());
  if (request.nodes.size() != replicas) {
    return InvalidError(std::string(trainjob::V1KindName(contract.kind)) + "/" + contract.name +
                        ": " + std::to_string(replicas) + " replicas need one node each, " +
                        std::to_string(request.nodes.size()) + " placed");
  }
  AttemptLayout layout;
  layout.nodes.resize(replicas);
  for (size_t n = 0; n < replicas; ++n) {
    layout.nodes[n].ranks.push_back({static_cast<uint32_t>(n), 0});
    layout.nodes[n].ports = n < ports.size() ? ports[n] : 0;
  }
  return layout;
}

Result<std::vector<v1::LaunchPlan>> MakeReplicaPlans(const PlanRequest& request,
                                                     const trainjob::V1JobContract& contract,
                                                     const AttemptLayout& layout,
                                                     const ReplicaEnv& env) {
  const std::vector<ReplicaRank> ranks = ReplicaRanks(contract);
  if (ranks.size() != request.nodes.size() || layout.nodes.size() != ranks.size()) {
    return InvalidError("v1 plan: " + std::to_string(ranks.size()) + " replicas, " +
                        std::to_string(request.nodes.size()) + " nodes placed");
  }
  const auto world = static_cast<uint32_t>(ranks.size());
  std::vector<v1::LaunchPlan> plans = EmptyPlans(request);
  for (const ReplicaRank& r : ranks) {
    TRAINLET_ASSIGN_OR_RETURN(EnvList own, env(ReplicaContext{request, contract, ranks, r}));
    v1::WorkerSpec* w = plans[r.rank].add_workers();
    for (const auto& a : r.replica->argv) w->add_argv(a);
    AddCommonWorkerEnv(request, {r.rank, 0, r.rank, world, 1}, *w);
    auto& map = *w->mutable_env();
    for (const auto& e : r.replica->env) map[e.name] = e.value;
    for (const auto& [name, value] : own) map[name] = value;
  }
  return plans;
}

}  // namespace trainlet
