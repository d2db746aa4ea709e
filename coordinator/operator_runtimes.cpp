#include "coordinator/operator_runtimes.h"

#include <algorithm>
#include <tuple>

#include "coordinator/job_key.h"
#include "trainlet/runtime_plugin.h"

namespace trainlet::coordinator {

namespace {

constexpr std::string_view kCluster = "ClusterTrainingRuntime";
constexpr std::string_view kNamespaced = "TrainingRuntime";
constexpr std::string_view kFrameworkLabel = "trainer.kubeflow.org/framework";

bool Selected(const trainjob::TrainingRuntime& rt, const v1::GetRuntimesRequest& request) {
  if (!request.kind().empty() && rt.kind != request.kind()) return false;
  if (!request.name().empty() && rt.name != request.name()) return false;
  if (rt.kind == kCluster || request.all_namespaces()) return true;
  return NamespaceOrDefault(rt.namespace_) == NamespaceOrDefault(request.namespace_());
}

// ClusterTrainingRuntimes first (an empty namespace sorts first), then by namespace and name.
bool ShownBefore(const v1::RuntimeInfo& a, const v1::RuntimeInfo& b) {
  return std::tie(a.namespace_(), a.name(), a.kind()) <
         std::tie(b.namespace_(), b.name(), b.kind());
}

}  // namespace

v1::RuntimeInfo DescribeRuntime(const trainjob::TrainingRuntime& rt) {
  v1::RuntimeInfo info;
  info.set_kind(rt.kind);
  info.set_name(rt.name);
  if (rt.kind != kCluster) info.set_namespace_(NamespaceOrDefault(rt.namespace_));
  const std::string policy = trainjob::FrameworkName(rt.ml_policy.framework);
  const auto label = rt.labels.find(std::string(kFrameworkLabel));
  info.set_framework(label != rt.labels.end() && !label->second.empty() ? label->second : policy);
  const RuntimePlugin* plugin = SelectRuntimePlugin(policy, rt.labels);
  info.set_plugin(plugin != nullptr ? std::string(plugin->name()) : "");
  info.set_num_nodes(static_cast<uint32_t>(std::max(rt.ml_policy.num_nodes.value_or(1), 1)));
  info.set_num_proc_per_node(rt.ml_policy.num_proc_per_node.value_or(""));
  // The container that runs the trainer: the launcher's when there is one (trainjob_model.h).
  const auto& container = rt.launcher ? rt.launcher : rt.node;
  if (container) {
    for (const auto& c : container->command) info.add_command(c);
    for (const auto& a : container->args) info.add_command(a);
  }
  info.set_yaml(rt.yaml);
  return info;
}

Result<v1::RuntimeList> ListRuntimes(const RuntimeCatalog& catalog,
                                     const v1::GetRuntimesRequest& request) {
  if (!request.kind().empty() && request.kind() != kCluster && request.kind() != kNamespaced) {
    return InvalidError("kind: \"" + request.kind() + "\" is not ClusterTrainingRuntime or " +
                        "TrainingRuntime");
  }
  v1::RuntimeList list;
  for (const auto& [key, rt] : catalog.all()) {
    if (Selected(rt, request)) *list.add_runtimes() = DescribeRuntime(rt);
  }
  std::sort(list.mutable_runtimes()->begin(), list.mutable_runtimes()->end(), ShownBefore);
  if (!request.name().empty() && list.runtimes().empty()) {
    const std::string ns = request.all_namespaces()
                               ? "any namespace"
                               : "namespace " + NamespaceOrDefault(request.namespace_());
    std::string looked_in;
    if (request.kind() == kCluster) {
      looked_in = "no ClusterTrainingRuntime has that name";
    } else if (request.kind() == kNamespaced) {
      looked_in = "no TrainingRuntime in " + ns + " has that name";
    } else {
      looked_in = "no ClusterTrainingRuntime, nor TrainingRuntime in " + ns + ", has that name";
    }
    return NotFoundError("runtime \"" + request.name() + "\" not found: " + looked_in);
  }
  return list;
}

}  // namespace trainlet::coordinator
