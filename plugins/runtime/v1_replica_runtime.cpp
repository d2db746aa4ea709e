#include "plugins/runtime/v1_replica_runtime.h"

#include "plugins/runtime/worker_env.h"

namespace trainlet {

Result<uint32_t> V1ReplicaRuntime::CountProcs(std::string_view num_proc_per_node,
                                              const v1::Topology*) const {
  return ParseProcCount(num_proc_per_node, "spec.trainer.numProcPerNode", 1);
}

Result<trainjob::V1JobContract> V1ReplicaRuntime::RequireContract(
    const PlanRequest& request) const {
  TRAINLET_ASSIGN_OR_RETURN(auto contract, ContractOf(request, spec_.kind));
  if (!contract) return InvalidError(std::string(spec_.refusal));
  return *contract;
}

Result<AttemptLayout> V1ReplicaRuntime::LayOut(const PlanRequest& request) const {
  TRAINLET_ASSIGN_OR_RETURN(const trainjob::V1JobContract contract, RequireContract(request));
  return LayOutReplicas(request, contract, spec_.ports(request, contract));
}

Result<std::vector<v1::LaunchPlan>> V1ReplicaRuntime::MakePlans(const PlanRequest& request,
                                                                const AttemptLayout& layout) const {
  TRAINLET_ASSIGN_OR_RETURN(const trainjob::V1JobContract contract, RequireContract(request));
  return MakeReplicaPlans(request, contract, layout, spec_.env);
}

}  // namespace trainlet
