// The Training Operator's JAXJob env (pkg/controller.v1/jax/envvar.go), for jobs converted from
// a kubeflow.org/v1 JAXJob: PYTHONUNBUFFERED=1, COORDINATOR_ADDRESS (Worker 0's node address),
// COORDINATOR_PORT (a port reserved there), NUM_PROCESSES (every replica) and PROCESS_ID (the
// replica's index).
#pragma once

#include <cstdint>
#include <vector>

#include "plugins/runtime/v1_replica_plans.h"

namespace trainlet {

// Ports each node reserves: 1 on Worker 0's node (node rank 0).
std::vector<uint32_t> JAXJobPorts(const trainjob::V1JobContract& contract);
Result<EnvList> JAXJobEnv(const ReplicaContext& at);

}  // namespace trainlet
