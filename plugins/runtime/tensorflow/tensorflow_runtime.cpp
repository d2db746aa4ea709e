#include "plugins/runtime/tensorflow/tensorflow_runtime.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <nlohmann/json.hpp>

#include "plugins/runtime/v1_replica_runtime.h"
#include "plugins/runtime/worker_env.h"

namespace trainlet {
namespace {

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// Every replica listens on its cluster endpoint: one port on every node.
std::vector<uint32_t> TFJobPorts(const PlanRequest& request, const trainjob::V1JobContract&) {
  return std::vector<uint32_t>(request.nodes.size(), 1);
}

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
  return std::make_unique<V1ReplicaRuntime>(V1ReplicaRuntimeSpec{
      .name = "tensorflow",
      .kind = trainjob::V1Kind::kTFJob,
      .launch_mode = "TFJob: one process per replica (Chief, Master, PS, Worker, Evaluator), each "
                     "with the Training Operator's TF_CONFIG",
      .refusal = "the tensorflow runtime runs TFJobs (kubeflow.org/v1) only: a TrainJob has no "
                 "TF_CONFIG replicas",
      .ports = &TFJobPorts,
      .env = &TFJobEnv,
  });
}

}  // namespace trainlet
