// `tensorflow`: the Training Operator's TFJob (kubeflow.org/v1), which Kubeflow Trainer v2 has no
// runtime for. Selected by the runtime label trainer.kubeflow.org/framework: tensorflow, which
// only the runtime made for a converted TFJob carries (common/trainjob/v1_conversion.h); a
// TrainJob without the TFJob contract is refused at layout.
//
// Each replica (Chief, Master, PS, Worker, Evaluator, in that rank order) runs as one process on
// its own node with TF_CONFIG exactly as the operator writes it
// (pkg/controller.v1/tensorflow/tensorflow.go), when the job has more than one replica:
//   {"cluster":{"ps":["10.0.0.2:40001"],"worker":["10.0.0.3:40002",...]},
//    "task":{"type":"worker","index":0},"environment":"cloud"}
// The cluster lists every replica type (in lower case, keys sorted, as Go marshals a map) with
// each replica's "<node address>:<port reserved on that node>", where the operator writes
// "<job>-<type>-<i>.<namespace>.svc:<tfjob-port>". With enableDynamicWorker the sparse form:
//   {"cluster":{"worker":{"1":"10.0.0.4:40003"},"ps":[...]},"task":{"type":"worker","index":1}}
#pragma once

#include <memory>
#include <string>

#include "plugins/runtime/v1_replica_plans.h"
#include "trainlet/runtime_plugin.h"

namespace trainlet {

std::unique_ptr<RuntimePlugin> MakeTensorflowRuntime();

// TF_CONFIG of one replica; empty when the job has one replica (the operator sets none).
// Invalid when a reserved port is missing.
Result<EnvList> TFJobEnv(const ReplicaContext& at);

}  // namespace trainlet
