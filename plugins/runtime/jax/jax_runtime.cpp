#include "plugins/runtime/jax/jax_runtime.h"

#include "plugins/runtime/builtin_runtime.h"
#include "plugins/runtime/jax/jaxjob_env.h"
#include "plugins/runtime/worker_env.h"

namespace trainlet {
namespace {

constexpr std::string_view kProcsField = "spec.trainer.numProcPerNode";

class JaxRuntime final : public BuiltinRuntime {
 public:
  std::string_view name() const override { return "jax"; }

  std::string LaunchMode(const PlanRequest& request) const override {
    if (auto c = ContractOf(request, trainjob::V1Kind::kJAXJob); c.ok() && c->has_value()) {
      return "JAXJob: one process per replica with the Training Operator's "
             "COORDINATOR_ADDRESS/COORDINATOR_PORT/NUM_PROCESSES/PROCESS_ID env";
    }
    return "processes started by the agents with JAX_COORDINATOR_ADDRESS/JAX_NUM_PROCESSES/"
           "JAX_PROCESS_ID (process 0 on " +
           (request.nodes.empty() ? std::string("node rank 0") : request.nodes[0].name) + ")";
  }

 protected:
  // "auto" is JAX's own convention: one process per host, which sees every local device.
  Result<uint32_t> CountProcs(std::string_view num_proc_per_node,
                              const v1::Topology*) const override {
    if (num_proc_per_node == "auto") return 1u;
    return ParseProcCount(num_proc_per_node, kProcsField, 1);
  }

  Result<AttemptLayout> LayOut(const PlanRequest& request) const override {
    if (request.argv.empty()) return InvalidError("spec.trainer.command: no command to run");
    TRAINLET_ASSIGN_OR_RETURN(auto contract, ContractOf(request, trainjob::V1Kind::kJAXJob));
    if (contract) return LayOutReplicas(request, *contract, JAXJobPorts(*contract));
    if (request.nodes.empty()) return InvalidError("jax plan: no nodes placed");
    TRAINLET_ASSIGN_OR_RETURN(const uint32_t per_node,
                              CountProcs(request.num_proc_per_node, nullptr));
    AttemptLayout layout = RanksInNodeOrder(std::vector<uint32_t>(request.nodes.size(), per_node));
    layout.nodes[0].ports = 1;  // the JAX coordination service on process 0
    return layout;
  }

  Result<std::vector<v1::LaunchPlan>> MakePlans(const PlanRequest& request,
                                                const AttemptLayout& layout) const override {
    TRAINLET_ASSIGN_OR_RETURN(auto contract, ContractOf(request, trainjob::V1Kind::kJAXJob));
    if (contract) return MakeReplicaPlans(request, *contract, layout, &JAXJobEnv);
    TRAINLET_ASSIGN_OR_RETURN(const uint32_t port,
                              ReservedPort(request, 0, 0, "JAX_COORDINATOR_ADDRESS"));
    const std::string coordinator = HostPort(request.nodes[0].address, port);
    const uint32_t world = WorldSize(layout);
    std::vector<v1::LaunchPlan> plans = EmptyPlans(request);
    for (uint32_t n = 0; n < plans.size(); ++n) {
      const auto& ranks = layout.nodes[n].ranks;
      for (const LaidOutRank& r : ranks) {
        v1::WorkerSpec* w = plans[n].add_workers();
        for (const auto& a : request.argv) w->add_argv(a);
        AddCommonWorkerEnv(
            request, {r.rank, r.local_rank, n, world, static_cast<uint32_t>(ranks.size())}, *w);
        auto& env = *w->mutable_env();
        env["JAX_COORDINATOR_ADDRESS"] = coordinator;
        env["JAX_NUM_PROCESSES"] = std::to_string(world);
        env["JAX_PROCESS_ID"] = std::to_string(r.rank);
      }
    }
    return plans;
  }
};

}  // namespace

std::unique_ptr<RuntimePlugin> MakeJaxRuntime() { return std::make_unique<JaxRuntime>(); }

}  // namespace trainlet
