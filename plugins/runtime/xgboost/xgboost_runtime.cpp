#include "plugins/runtime/xgboost/xgboost_runtime.h"

#include "plugins/runtime/builtin_runtime.h"
#include "plugins/runtime/worker_env.h"

namespace trainlet {
namespace {

constexpr std::string_view kProcsField = "spec.trainer.numProcPerNode";

class XgboostRuntime final : public BuiltinRuntime {
 public:
  std::string_view name() const override { return "xgboost"; }
  std::vector<std::string_view> ReservedEnv() const override {
    return {"DMLC_TRACKER_URI", "DMLC_TRACKER_PORT", "DMLC_TASK_ID", "DMLC_NUM_WORKER"};
  }

  std::string LaunchMode(const PlanRequest& request) const override {
    return "workers started by the agents with DMLC_TRACKER_URI/PORT, DMLC_TASK_ID, "
           "DMLC_NUM_WORKER (task 0 on " +
           (request.nodes.empty() ? std::string("node rank 0") : request.nodes[0].name) +
           " runs the tracker)";
  }

 protected:
  Result<uint32_t> CountProcs(std::string_view num_proc_per_node,
                              const v1::Topology* topology) const override {
    if (num_proc_per_node == "auto") {
      return topology && topology->gpus_size() > 0 ? static_cast<uint32_t>(topology->gpus_size())
                                                   : 1u;
    }
    return ParseProcCount(num_proc_per_node, kProcsField, 1);
  }

  Result<AttemptLayout> LayOut(const PlanRequest& request) const override {
    if (request.argv.empty()) return InvalidError("spec.trainer.command: no command to run");
    if (request.nodes.empty()) return InvalidError("xgboost plan: no nodes placed");
    TRAINLET_RETURN_IF_ERROR(CheckReservedEnv(request, "xgboost", ReservedEnv()));
    std::vector<uint32_t> procs(request.nodes.size());
    for (size_t n = 0; n < procs.size(); ++n) {
      TRAINLET_ASSIGN_OR_RETURN(procs[n],
                                CountProcs(request.num_proc_per_node, &request.nodes[n].topology));
    }
    AttemptLayout layout = RanksInNodeOrder(procs);
    layout.nodes[0].ports = 1;  // the tracker's port
    return layout;
  }

  Result<std::vector<v1::LaunchPlan>> MakePlans(const PlanRequest& request,
                                                const AttemptLayout& layout) const override {
    TRAINLET_ASSIGN_OR_RETURN(const uint32_t port,
                              ReservedPort(request, 0, 0, "DMLC_TRACKER_PORT"));
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
        env["DMLC_TRACKER_URI"] = request.nodes[0].address;
        env["DMLC_TRACKER_PORT"] = std::to_string(port);
        env["DMLC_TASK_ID"] = std::to_string(r.rank);
        env["DMLC_NUM_WORKER"] = std::to_string(world);
      }
    }
    return plans;
  }
};

}  // namespace

std::unique_ptr<RuntimePlugin> MakeXgboostRuntime() { return std::make_unique<XgboostRuntime>(); }

}  // namespace trainlet
