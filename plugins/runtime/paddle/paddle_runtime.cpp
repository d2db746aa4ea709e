#include "plugins/runtime/paddle/paddle_runtime.h"

#include "plugins/runtime/builtin_runtime.h"
#include "plugins/runtime/worker_env.h"

namespace trainlet {
namespace {

Result<trainjob::V1JobContract> RequireContract(const PlanRequest& request) {
  TRAINLET_ASSIGN_OR_RETURN(auto contract, ContractOf(request, trainjob::V1Kind::kPaddleJob));
  if (!contract) {
    return InvalidError("the paddle runtime runs PaddleJobs (kubeflow.org/v1) only");
  }
  return *contract;
}

class PaddleRuntime final : public BuiltinRuntime {
 public:
  std::string_view name() const override { return "paddle"; }

  std::string LaunchMode(const PlanRequest&) const override {
    return "PaddleJob: one process per replica with the Training Operator's PADDLE_MASTER/"
           "PADDLE_NNODES/PADDLE_JOB_ID env";
  }

 protected:
  Result<uint32_t> CountProcs(std::string_view num_proc_per_node,
                              const v1::Topology*) const override {
    return ParseProcCount(num_proc_per_node, "spec.trainer.numProcPerNode", 1);
  }

  // The rendezvous endpoint (Master 0, else Worker 0) is rank 0: one port on node rank 0.
  Result<AttemptLayout> LayOut(const PlanRequest& request) const override {
    TRAINLET_ASSIGN_OR_RETURN(const trainjob::V1JobContract contract, RequireContract(request));
    return LayOutReplicas(request, contract, {1});
  }

  Result<std::vector<v1::LaunchPlan>> MakePlans(const PlanRequest& request,
                                                const AttemptLayout& layout) const override {
    TRAINLET_ASSIGN_OR_RETURN(const trainjob::V1JobContract contract, RequireContract(request));
    return MakeReplicaPlans(request, contract, layout, &PaddleJobEnv);
  }
};

}  // namespace

Result<EnvList> PaddleJobEnv(const ReplicaContext& at) {
  TRAINLET_ASSIGN_OR_RETURN(const uint32_t port, ReservedPort(at.request, 0, 0, "PADDLE_MASTER"));
  const bool ps_mode = at.contract.Find("Master") != nullptr;
  const std::string& type = at.me.replica->type;
  EnvList env = {{"PYTHONUNBUFFERED", "1"},
                 {"PADDLE_JOB_ID", at.contract.name},
                 {"PADDLE_NNODES", std::to_string(at.contract.TotalReplicas())}};
  // The operator's test: index 0 in collective mode (whatever the type), Master 0 in PS mode.
  const bool endpoint_itself = at.me.index == 0 && (!ps_mode || type == "Master");
  // The operator writes "$(POD_IP_DUMMY):<port>" there, which Kubernetes expands (the variable
  // comes first in the pod's env); the process sees the address, and so it does here. The agent
  // expands $(NAME) only to its node env, so the plan carries the expanded value.
  if (endpoint_itself) env.emplace_back("POD_IP_DUMMY", at.Address(at.me.rank));
  env.emplace_back("PADDLE_MASTER", HostPort(at.Address(0), port));
  if (ps_mode) {
    env.emplace_back(type == "Master" ? "PADDLE_SERVER_NUM" : "PADDLE_TRAINER_NUM", "1");
  }
  return env;
}

std::unique_ptr<RuntimePlugin> MakePaddleRuntime() { return std::make_unique<PaddleRuntime>(); }

}  // namespace trainlet
