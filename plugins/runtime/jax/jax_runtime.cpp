#include "plugins/runtime/jax/jax_runtime.h"

#include "plugins/runtime/worker_env.h"

namespace trainlet {
namespace {

constexpr std::string_view kProcsField = "spec.trainer.numProcPerNode";

class JaxRuntime final : public RuntimePlugin {
 public:
  std::string_view name() const override { return "jax"; }

  // "auto" is JAX's own convention: one process per host, which sees every local device.
  Result<uint32_t> ProcsPerNode(std::string_view num_proc_per_node,
                                const v1::Topology*) const override {
    if (num_proc_per_node == "auto") return 1u;
    return ParseProcCount(num_proc_per_node, kProcsField, 1);
  }

  uint32_t PortsPerNode(const PlanRequest&, uint32_t node_rank) const override {
    return node_rank == 0 ? 1 : 0;  // the JAX coordination service on process 0
  }

  std::string LaunchMode(const PlanRequest& request) const override {
    return "processes started by the agents with JAX_COORDINATOR_ADDRESS/JAX_NUM_PROCESSES/"
           "JAX_PROCESS_ID (process 0 on " +
           (request.nodes.empty() ? std::string("node rank 0") : request.nodes[0].name) + ")";
  }

  Result<std::vector<v1::LaunchPlan>> Plan(const PlanRequest& request) const override {
    if (request.argv.empty()) return InvalidError("spec.trainer.command: no command to run");
    if (request.nodes.empty()) return InvalidError("jax plan: no nodes placed");
    TRAINLET_ASSIGN_OR_RETURN(const uint32_t per_node,
                              ProcsPerNode(request.num_proc_per_node, nullptr));
    TRAINLET_ASSIGN_OR_RETURN(const uint32_t port,
                              ReservedPort(request, 0, 0, "JAX_COORDINATOR_ADDRESS"));
    const std::string coordinator = HostPort(request.nodes[0].address, port);
    const auto nodes = static_cast<uint32_t>(request.nodes.size());
    const uint32_t world = nodes * per_node;
    std::vector<v1::LaunchPlan> plans = EmptyPlans(request);
    for (uint32_t n = 0; n < nodes; ++n) {
      for (uint32_t l = 0; l < per_node; ++l) {
        const uint32_t rank = n * per_node + l;
        v1::WorkerSpec* w = plans[n].add_workers();
        for (const auto& a : request.argv) w->add_argv(a);
        AddCommonWorkerEnv(request, {rank, l, n, world, per_node}, *w);
        auto& env = *w->mutable_env();
        env["JAX_COORDINATOR_ADDRESS"] = coordinator;
        env["JAX_NUM_PROCESSES"] = std::to_string(world);
        env["JAX_PROCESS_ID"] = std::to_string(rank);
      }
    }
    return plans;
  }
};

}  // namespace

std::unique_ptr<RuntimePlugin> MakeJaxRuntime() { return std::make_unique<JaxRuntime>(); }

}  // namespace trainlet
