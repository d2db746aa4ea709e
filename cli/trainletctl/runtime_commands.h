// trainletctl get clustertrainingruntimes|trainingruntimes (singular names and "kind/NAME" too):
// the runtimes a TrainJob's runtimeRef may name, shipped and applied (GetRuntimesRequest).
// TrainingRuntimes are namespaced (-n NS, -A); ClusterTrainingRuntimes are not.
#pragma once

#include <string>

#include "trainlet/v1/operator.pb.h"
#include "trainletctl/commands.h"
#include "trainletctl/render.h"

namespace trainlet::cli {

// "clustertrainingruntimes", "clustertrainingruntime", "ClusterTrainingRuntime" or with the API
// group (".trainer.kubeflow.org") -> "ClusterTrainingRuntime"; the same for TrainingRuntime; ""
// for any other. "kind/NAME" sets `name` when it is empty.
std::string RuntimeKindOf(std::string resource, std::string& name);

// The table (NAME, FRAMEWORK, PLUGIN, NODES, COMMAND; NAMESPACE first for TrainingRuntimes with
// `all_namespaces`), -o json|yaml, or -o name.
std::string RenderRuntimes(const v1::RuntimeList& list, const std::string& kind,
                           OutputFormat format, bool all_namespaces);

int CmdGetRuntimes(const CommonFlags& f, const std::string& kind, const std::string& name);

}  // namespace trainlet::cli
