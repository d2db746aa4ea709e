// The Training Operator's XGBoostJob env (pkg/controller.v1/xgboost/xgboost.go), for jobs
// converted from a kubeflow.org/v1 XGBoostJob: MASTER_ADDR (the Master's node address),
// MASTER_PORT (a port reserved there, where rank 0 runs the tracker), WORLD_SIZE (every replica),
// RANK (Master 0, Worker i -> i + 1), PYTHONUNBUFFERED=1, and with more than one replica
// WORKER_ADDRS (Worker 0..n-1's node addresses, comma-separated) and WORKER_PORT (LightGBM's
// listen port: a port reserved on the replica's own node, and Worker 0's for the Master; the
// operator gives every pod one number, trainlet's agents may hand out different ones).
#pragma once

#include <cstdint>
#include <vector>

#include "plugins/runtime/v1_replica_plans.h"

namespace trainlet {

// Ports each node reserves: 1 on every node (the Master's MASTER_PORT, a Worker's WORKER_PORT).
std::vector<uint32_t> XGBoostJobPorts(const trainjob::V1JobContract& contract);
Result<EnvList> XGBoostJobEnv(const ReplicaContext& at);

}  // namespace trainlet
