// `jax`: Kubeflow's mlPolicy.jax (runtime jax-distributed).
//
// Every process gets JAX_COORDINATOR_ADDRESS (node rank 0's address and a port its agent
// reserved), JAX_NUM_PROCESSES and JAX_PROCESS_ID, which jax.distributed.initialize() reads.
// As in Kubeflow, one process per node uses all of the node's devices; numProcPerNode N > 1
// starts N processes per node instead (process ids in rank order), e.g. one per GPU.
#pragma once

#include <memory>

#include "trainlet/runtime_plugin.h"

namespace trainlet {

std::unique_ptr<RuntimePlugin> MakeJaxRuntime();

}  // namespace trainlet
