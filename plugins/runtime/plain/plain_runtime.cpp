#include "plugins/runtime/plain/plain_runtime.h"

#include "plugins/runtime/builtin_runtime.h"
#include "plugins/runtime/worker_env.h"

namespace trainlet {
namespace {

class PlainRuntime final : public BuiltinRuntime {
 public:
  std::string_view name() const override { return "plain"; }

  std::string LaunchMode(const PlanRequest&) const override {
    return "ranks started directly by the agents";
  }

 protected:
  Result<uint32_t> CountProcs(std::string_view num_proc_per_node,
                              const v1::Topology*) const override {
    if (num_proc_per_node == "auto") {
      return InvalidError(
          "spec.trainer.numProcPerNode: \"auto\" needs a framework runtime (torch); the plain "
          "runtime takes a number");
    }
    return ParseProcCount(num_proc_per_node, "spec.trainer.numProcPerNode", 1);
  }

  Result<AttemptLayout> LayOut(const PlanRequest& request) const override {
    if (request.argv.empty()) return InvalidError("spec.trainer.command: no command to run");
    TRAINLET_ASSIGN_OR_RETURN(const uint32_t per_node,
                              CountProcs(request.num_proc_per_node, nullptr));
    return RanksInNodeOrder(std::vector<uint32_t>(request.nodes.size(), per_node));
  }

  Result<std::vector<v1::LaunchPlan>> MakePlans(const PlanRequest& request,
                                                const AttemptLayout& layout) const override {
    const uint32_t world = WorldSize(layout);
    std::vector<v1::LaunchPlan> plans = EmptyPlans(request);
    for (uint32_t n = 0; n < plans.size(); ++n) {
      const auto& ranks = layout.nodes[n].ranks;
      for (const LaidOutRank& r : ranks) {
        v1::WorkerSpec* w = plans[n].add_workers();
        for (const auto& a : request.argv) w->add_argv(a);
        AddCommonWorkerEnv(
            request, {r.rank, r.local_rank, n, world, static_cast<uint32_t>(ranks.size())}, *w);
      }
    }
    return plans;
  }
};

}  // namespace

std::unique_ptr<RuntimePlugin> MakePlainRuntime() { return std::make_unique<PlainRuntime>(); }

}  // namespace trainlet
