#include "plugins/runtime/jax/jaxjob_env.h"

#include "plugins/runtime/worker_env.h"

namespace trainlet {

std::vector<uint32_t> JAXJobPorts(const trainjob::V1JobContract&) { return {1}; }

Result<EnvList> JAXJobEnv(const ReplicaContext& at) {
  TRAINLET_ASSIGN_OR_RETURN(const uint32_t port,
                            ReservedPort(at.request, 0, 0, "COORDINATOR_PORT"));
  return EnvList{{"PYTHONUNBUFFERED", "1"},
                 {"COORDINATOR_PORT", std::to_string(port)},
                 {"COORDINATOR_ADDRESS", at.Address(0)},
                 {"NUM_PROCESSES", std::to_string(at.contract.TotalReplicas())},
                 {"PROCESS_ID", std::to_string(at.me.index)}};
}

}  // namespace trainlet
