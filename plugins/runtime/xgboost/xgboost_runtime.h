// `xgboost`: Kubeflow's mlPolicy.xgboost (runtime xgboost-distributed), Rabit/collective style.
//
// Every worker gets DMLC_TRACKER_URI (node rank 0's address), DMLC_TRACKER_PORT (a port the agent
// of node rank 0 reserved), DMLC_TASK_ID (its rank) and DMLC_NUM_WORKER (the world size). Task 0
// runs the tracker on that address and port; the others connect to it. As in Kubeflow, a
// TrainJob that sets one of these variables itself is refused (spec.trainer.env).
//
// Kubeflow starts one process per node and counts DMLC_NUM_WORKER as nodes x GPUs per node,
// leaving the per-GPU workers to the process. trainlet starts numProcPerNode workers per node
// (default 1, so the CPU case is Kubeflow's exactly; "auto" is the node's GPUs, else 1), each with
// its own task id, and binds each to its own GPU.
#pragma once

#include <memory>

#include "trainlet/runtime_plugin.h"

namespace trainlet {

std::unique_ptr<RuntimePlugin> MakeXgboostRuntime();

}  // namespace trainlet
