#include "plugins/runtime/tensorflow/tensorflow_runtime.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <nlohmann/json.hpp>

#include "plugins/runtime/builtin_runtime.h"
#include "plugins/runtime/worker_env.h"

namespace trainlet {
namespace {

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

Result<trainjob::V1JobContract> RequireContract(const PlanRequest& request) {
  TRAINLET_ASSIGN_OR_RETURN(auto contract, ContractOf(request, trainjob::V1Kind::kTFJob));
  if (!contract) {
    return InvalidError(
        "the tensorflow runtime runs TFJobs (kubeflow.org/v1) only: a TrainJob has no TF_CONFIG "
        "replicas");
  }
  return *contract;
}

class TensorflowRuntime final : public BuiltinRuntime {
 public:
  std::string_view name() const override { return "tensorflow"; }

  std::string LaunchMode(const PlanRequest&) const override {
    return "TFJob: one process per replica (Chief, Master, PS, Worker, Evaluator), each with the "
           "Training Operator's TF_CONFIG";
  }

 protected:
  Result<uint32_t> CountProcs(std::string_view num_proc_per_node,
                              const v1::Topology*) const override {
    return ParseProcCount(num_proc_per_node, "spec.trainer.numProcPerNode", 1);
  }

  // Every replica listens on its cluster endpoint: one port on every node.
  Result<AttemptLayout> LayOut(const PlanRequest& request) const override {
    TRAINLET_ASSIGN_OR_RETURN(const trainjob::V1JobContract contract, RequireContract(request));
    return LayOutReplicas(request, contract, std::vector<uint32_t>(request.nodes.size(), 1));
  }

  Result<std::vector<v1::LaunchPlan>> MakePlans(const PlanRequest& request,
                                                const AttemptLayout& layout) const override {
    TRAINLET_ASSIGN_OR_RETURN(const trainjob::V1JobContract contract, RequireContract(request));
    return MakeReplicaPlans(request, contract, layout, &TFJobEnv);
  }
};

}  // namespace

Result<EnvList> TFJobEnv(const ReplicaContext& at) {
  if (at.ranks.size() <= 1) return EnvList{};  // not distributed: no TF_CONFIG
  // The cluster: every type's endpoints, keyed by the type in lower case (a std::map sorts the
  // keys as Go's encoding/json sorts a map's).
  std::map<std::string, std::vector<std::string>> cluster;
  for (const ReplicaRank& r : at.ranks) {
    TRAINLET_ASSIGN_OR_RETURN(const uint32_t port,
                              ReservedPort(at.request, r.rank, 0, "TF_CONFIG"));
    cluster[Lower(r.replica->type)].push_back(HostPort(at.Address(r.rank), port));
  }
  const std::string type = Lower(at.me.replica->type);
  // ordered_json keeps the fields in the order of the operator's Go structs.
  nlohmann::ordered_json task = {{"type", type}, {"index", at.me.index}};
  nlohmann::ordered_json config;
  if (at.contract.enable_dynamic_worker) {
    nlohmann::ordered_json sparse = {{"worker", nlohmann::ordered_json::object()},
                                     {"ps", nlohmann::ordered_json::array()}};
    if (type == "ps") {
      sparse["ps"].push_back(cluster[type][at.me.index]);
    } else if (type == "worker") {
      for (const auto& ps : cluster["ps"]) sparse["ps"].push_back(ps);
      sparse["worker"][std::to_string(at.me.index)] = cluster[type][at.me.index];
    }
    config = {{"cluster", sparse}, {"task", task}};
  } else {
    nlohmann::ordered_json dense = nlohmann::ordered_json::object();
    for (const auto& [t, endpoints] : cluster) dense[t] = endpoints;
    config = {{"cluster", dense}, {"task", task}, {"environment", "cloud"}};
  }
  return EnvList{{"TF_CONFIG", config.dump()}};
}

std::unique_ptr<RuntimePlugin> MakeTensorflowRuntime() {
  return std::make_unique<TensorflowRuntime>();
}

}  // namespace trainlet
