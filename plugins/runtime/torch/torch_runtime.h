// `torch`: Kubeflow's mlPolicy.torch (runtimes torch-distributed, torchtune-*), two ways.
//
// - The trainer command is a torch launcher (IsTorchLauncher): one process per node, given
//   Kubeflow's PET_NNODES, PET_NPROC_PER_NODE, PET_NODE_RANK, PET_MASTER_ADDR and PET_MASTER_PORT,
//   which torchrun reads as its --nnodes, --nproc-per-node, --node-rank, --master-addr and
//   --master-port. torchrun starts and restarts the node's ranks.
// - Otherwise the agents start numProcPerNode ranks per node directly, each with the env torchrun
//   would have given it (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR,
//   MASTER_PORT, ...), so no torchrun is needed; a failed rank restarts the whole gang.
//
// A job converted from a kubeflow.org/v1 PyTorchJob (its TrainJob carries the V1JobContract) runs
// one process per replica instead, with the Training Operator's env (pytorchjob_env.h).
//
// MASTER_PORT is a port the agent of node rank 0 reserved for the attempt (the layout asks for
// one there); Render fails (Invalid) while it is missing. docs/runtimes.md has the rules.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "trainlet/runtime_plugin.h"

namespace trainlet {

std::unique_ptr<RuntimePlugin> MakeTorchRuntime();

// True when `argv` starts a torch launcher that reads PET_*: `torchrun ...` (any path, e.g.
// /usr/bin/torchrun), `python[3[.N]] [-opts] -m torch.distributed.run ...` (also -mtorch...), or
// torchtune's `tune run ...` (built on torchrun's parser). A launcher hidden inside a shell
// (`bash -c "torchrun ..."`) is not seen: such a command gets the direct-launch env.
bool IsTorchLauncher(const std::vector<std::string>& argv);

}  // namespace trainlet
