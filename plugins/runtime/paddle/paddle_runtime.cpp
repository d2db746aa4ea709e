#include "plugins/runtime/paddle/paddle_runtime.h"

#include "plugins/runtime/v1_replica_runtime.h"
#include "plugins/runtime/worker_env.h"

namespace trainlet {
namespace {

// The rendezvous endpoint (Master 0, else Worker 0) is rank 0: one port on node rank 0.
std::vector<uint32_t> PaddleJobPorts(const PlanRequest&, const trainjob::V1JobContract&) {
  return {1};
}

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

std::unique_ptr<RuntimePlugin> MakePaddleRuntime() {
  return std::make_unique<V1ReplicaRuntime>(V1ReplicaRuntimeSpec{
      .name = "paddle",
      .kind = trainjob::V1Kind::kPaddleJob,
      .launch_mode = "PaddleJob: one process per replica with the Training Operator's "
                     "PADDLE_MASTER/PADDLE_NNODES/PADDLE_JOB_ID env",
      .refusal = "the paddle runtime runs PaddleJobs (kubeflow.org/v1) only",
      .ports = &PaddleJobPorts,
      .env = &PaddleJobEnv,
  });
}

}  // namespace trainlet
