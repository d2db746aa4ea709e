// The Training Operator's PyTorchJob env (pkg/controller.v1/pytorch: envvar.go, master.go,
// elastic.go), for jobs converted from a kubeflow.org/v1 PyTorchJob. Every replica gets
// PYTHONUNBUFFERED=1 and PET_NNODES (the replicas, or "min:max" with an elasticPolicy). With a
// Master: MASTER_ADDR and PET_MASTER_ADDR (the Master's node), MASTER_PORT and PET_MASTER_PORT (a
// port reserved there), WORLD_SIZE (replicas x nprocPerNode, where a non-integer nprocPerNode
// counts 1), RANK and PET_NODE_RANK (Master 0, Worker i -> i + 1). PET_NPROC_PER_NODE is
// nprocPerNode as written ("auto" by default). With an elasticPolicy: PET_RDZV_ENDPOINT
// (rdzvHost, else Worker 0's node address; rdzvPort, else a port reserved there),
// PET_RDZV_BACKEND (c10d by default), PET_MAX_RESTARTS, PET_NPROC_PER_NODE (nProcPerNode),
// PET_RDZV_ID, PET_RDZV_CONF ("k=v,k=v") and PET_STANDALONE ("") when set.
#pragma once

#include <cstdint>
#include <vector>

#include "plugins/runtime/v1_replica_plans.h"

namespace trainlet {

// Ports each node reserves: 1 on the Master's node; 1 on Worker 0's node for the elastic
// rendezvous when no rdzvPort is given.
std::vector<uint32_t> PyTorchJobPorts(const trainjob::V1JobContract& contract);
// The env of one replica. Invalid when a reserved port is missing.
Result<EnvList> PyTorchJobEnv(const ReplicaContext& at);

}  // namespace trainlet
