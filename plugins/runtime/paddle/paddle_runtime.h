// `paddle`: the Training Operator's PaddleJob (kubeflow.org/v1), which Kubeflow Trainer v2 has no
// runtime for. Selected by the runtime label trainer.kubeflow.org/framework: paddle, which only
// the runtime made for a converted PaddleJob carries; a TrainJob without the PaddleJob contract
// is refused at layout.
//
// Each replica (Master, then Worker) runs as one process on its own node with the operator's env
// (pkg/controller.v1/paddlepaddle/envvar.go): PYTHONUNBUFFERED=1, PADDLE_JOB_ID (the job's
// name), PADDLE_NNODES (every replica) and PADDLE_MASTER, the rendezvous endpoint: Master 0's
// node (PS mode) or Worker 0's (collective mode, no Master), and a port reserved there. That
// replica also gets POD_IP_DUMMY (its address); the operator writes its PADDLE_MASTER as
// "$(POD_IP_DUMMY):<port>", which Kubernetes expands, so every replica sees "<address>:<port>". In
// PS mode a Master gets PADDLE_SERVER_NUM=1 and a Worker PADDLE_TRAINER_NUM=1.
#pragma once

#include <memory>

#include "plugins/runtime/v1_replica_plans.h"
#include "trainlet/runtime_plugin.h"

namespace trainlet {

std::unique_ptr<RuntimePlugin> MakePaddleRuntime();

// The env of one replica. Invalid when the reserved port is missing.
Result<EnvList> PaddleJobEnv(const ReplicaContext& at);

}  // namespace trainlet
