// The built-in runtime plugins, in one ordered table. Adding a runtime means adding its folder
// and one line here.
#include <functional>

#include "plugins/runtime/jax/jax_runtime.h"
#include "plugins/runtime/mlx/mlx_runtime.h"
#include "plugins/runtime/mpi/mpi_runtime.h"
#include "plugins/runtime/paddle/paddle_runtime.h"
#include "plugins/runtime/plain/plain_runtime.h"
#include "plugins/runtime/tensorflow/tensorflow_runtime.h"
#include "plugins/runtime/torch/torch_runtime.h"
#include "plugins/runtime/xgboost/xgboost_runtime.h"
#include "trainlet/runtime_plugin.h"

namespace trainlet {
namespace {

struct PluginEntry {
  const char* framework;
  std::unique_ptr<RuntimePlugin> (*make)();
};

constexpr PluginEntry kBuiltinRuntimes[] = {
    {"plain", &MakePlainRuntime},           {"mpi", &MakeMpiRuntime},
    {"torch", &MakeTorchRuntime},           {"jax", &MakeJaxRuntime},
    {"xgboost", &MakeXgboostRuntime},       {"mlx", &MakeMlxRuntime},
    {"tensorflow", &MakeTensorflowRuntime}, {"paddle", &MakePaddleRuntime},
};

// The label Kubeflow puts on its runtimes to name the trainer's framework.
constexpr std::string_view kFrameworkLabel = "trainer.kubeflow.org/framework";

const std::vector<std::unique_ptr<RuntimePlugin>>& Instances() {
  static const auto* instances = [] {
    auto* v = new std::vector<std::unique_ptr<RuntimePlugin>>();
    for (const auto& e : kBuiltinRuntimes) v->push_back(e.make());
    return v;
  }();
  return *instances;
}

}  // namespace

const RuntimePlugin* FindRuntimePlugin(std::string_view framework) {
  for (const auto& p : Instances()) {
    if (p->name() == framework) return p.get();
  }
  return nullptr;
}

// The rules, in order:
// 1. A runtime labelled trainer.kubeflow.org/framework: mlx without an mlPolicy.mpi section runs
//    on the native mlx plugin (ring or jaccl). Kubeflow's mlx-distributed has mpi and stays on
//    mpi: MLX over OpenMPI, as Kubeflow runs it.
// 2. A runtime without an mlPolicy framework labelled trainer.kubeflow.org/framework: tensorflow
//    or paddle runs on that plugin: v2 has no mlPolicy for them, and the runtimes made for
//    converted TFJobs and PaddleJobs (common/trainjob/v1_conversion.h) carry the label.
// 3. Otherwise the mlPolicy key decides (torchtune-* runtimes have mlPolicy.torch, so torch).
const RuntimePlugin* SelectRuntimePlugin(std::string_view framework,
                                         const std::map<std::string, std::string>& labels) {
  if (auto it = labels.find(std::string(kFrameworkLabel));
      it != labels.end() && it->second == "mlx" && framework != "mpi") {
    return FindRuntimePlugin("mlx");
  }
  if (auto it = labels.find(std::string(kFrameworkLabel));
      it != labels.end() && framework == "plain" &&
      (it->second == "tensorflow" || it->second == "paddle")) {
    return FindRuntimePlugin(it->second);
  }
  return FindRuntimePlugin(framework);
}

std::vector<std::string> RuntimePluginNames() {
  std::vector<std::string> names;
  for (const auto& e : kBuiltinRuntimes) names.emplace_back(e.framework);
  return names;
}

}  // namespace trainlet
