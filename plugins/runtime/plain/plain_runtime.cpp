#include "plugins/runtime/plain/plain_runtime.h"

#include "plugins/runtime/worker_env.h"

namespace trainlet {
namespace {

class PlainRuntime final : public RuntimePlugin {
 public:
  std::string_view name() const override { return "plain"; }

  Result<uint32_t> ProcsPerNode(std::string_view num_proc_per_node,
                                const v1::Topology*) const override {
    if (num_proc_per_node == "auto") {
      return InvalidError(
          "spec.trainer.numProcPerNode: \"auto\" needs a framework runtime (torch); the plain "
          "runtime takes a number");
    }
    return ParseProcCount(num_proc_per_node, "spec.trainer.numProcPerNode", 1);
  }

  std::string LaunchMode(const PlanRequest&) const override {
    return "ranks started directly by the agents";
  }

  Result<std::vector<v1::LaunchPlan>> Plan(const PlanRequest& request) const override {
    if (request.argv.empty()) return InvalidError("spec.trainer.command: no command to run");
    TRAINLET_ASSIGN_OR_RETURN(const uint32_t per_node,
                              ProcsPerNode(request.num_proc_per_node, nullptr));
    const auto nodes = static_cast<uint32_t>(request.nodes.size());
    std::vector<v1::LaunchPlan> plans(nodes);
    for (uint32_t n = 0; n < nodes; ++n) {
      v1::LaunchPlan& plan = plans[n];
      plan.set_job(request.job);
      plan.set_attempt(request.attempt);
      plan.set_node_rank(n);
      plan.set_stop_grace_ms(request.stop_grace_ms);
      for (uint32_t l = 0; l < per_node; ++l) {
        v1::WorkerSpec* w = plan.add_workers();
        for (const auto& a : request.argv) w->add_argv(a);
        AddCommonWorkerEnv(request, {n * per_node + l, l, n, nodes * per_node, per_node}, *w);
      }
    }
    return plans;
  }
};

}  // namespace

std::unique_ptr<RuntimePlugin> MakePlainRuntime() { return std::make_unique<PlainRuntime>(); }

}  // namespace trainlet
