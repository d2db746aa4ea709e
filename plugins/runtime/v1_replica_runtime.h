// A runtime plugin for a Training Operator kind that Kubeflow Trainer v2 has no runtime for
// (TFJob, PaddleJob): it runs only jobs converted from that kind, one process per replica on its
// own node (v1_replica_plans.h), and differs from kind to kind only in what V1ReplicaRuntimeSpec
// names: the plugin's name, the kind, the launch line, the ports each node reserves and the env
// of each replica. A TrainJob without the kind's contract is refused at layout with the spec's
// reason.
//
// torch, xgboost and jax are not built on it: they run TrainJobs as well, and take only the
// v1 pieces (LayOutReplicas, MakeReplicaPlans) for their converted jobs.
//
// Immutable after construction; the plugin methods may be called from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/trainjob/v1_job.h"
#include "plugins/runtime/builtin_runtime.h"
#include "plugins/runtime/v1_replica_plans.h"

namespace trainlet {

struct V1ReplicaRuntimeSpec {
  std::string_view name;         // the plugin's name (trainer.kubeflow.org/framework)
  trainjob::V1Kind kind;         // the only kind it runs
  std::string_view launch_mode;  // RuntimePlugin::LaunchMode's line
  std::string_view refusal;      // Invalid's message for a job that is not of `kind`
  // Ports each node reserves, by node rank (missing entries: 0). Pure.
  std::vector<uint32_t> (*ports)(const PlanRequest& request,
                                 const trainjob::V1JobContract& contract);
  // The env of one replica; Invalid when a reserved port it needs is missing. Pure.
  Result<EnvList> (*env)(const ReplicaContext& at);
};

class V1ReplicaRuntime final : public BuiltinRuntime {
 public:
  // The spec's strings must outlive the plugin (string literals do).
  explicit V1ReplicaRuntime(const V1ReplicaRuntimeSpec& spec) : spec_(spec) {}

  std::string_view name() const override { return spec_.name; }
  std::string LaunchMode(const PlanRequest&) const override {
    return std::string(spec_.launch_mode);
  }

 protected:
  // One process per replica: numProcPerNode is a count (default 1) and changes nothing else.
  Result<uint32_t> CountProcs(std::string_view num_proc_per_node,
                              const v1::Topology* topology) const override;
  Result<AttemptLayout> LayOut(const PlanRequest& request) const override;
  Result<std::vector<v1::LaunchPlan>> MakePlans(const PlanRequest& request,
                                                const AttemptLayout& layout) const override;

 private:
  Result<trainjob::V1JobContract> RequireContract(const PlanRequest& request) const;

  const V1ReplicaRuntimeSpec spec_;
};

}  // namespace trainlet
