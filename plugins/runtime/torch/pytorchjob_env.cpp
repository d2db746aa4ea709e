#include "plugins/runtime/torch/pytorchjob_env.h"

#include <charconv>

#include "plugins/runtime/worker_env.h"

namespace trainlet {
namespace {

// The node of Worker 0: right after the Master's when there is one.
uint32_t FirstWorkerRank(const trainjob::V1JobContract& c) {
  return c.Find("Master") != nullptr ? 1u : 0u;
}

// nprocPerNode as the Training Operator counts it for WORLD_SIZE: an integer, else 1.
int32_t NprocInt(const trainjob::V1JobContract& c) {
  if (!c.nproc_per_node) return 1;
  int32_t n = 0;
  const std::string& s = *c.nproc_per_node;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
  return ec == std::errc() && end == s.data() + s.size() ? n : 1;
}

Result<EnvList> ElasticEnv(const ReplicaContext& at) {
  const trainjob::V1ElasticPolicy& e = *at.contract.elastic;
  const uint32_t worker0 = FirstWorkerRank(at.contract);
  EnvList env;
  const std::string host = e.rdzv_host ? *e.rdzv_host : at.Address(worker0);
  uint32_t port = 0;
  if (e.rdzv_port) {
    port = static_cast<uint32_t>(*e.rdzv_port);
  } else {
    TRAINLET_ASSIGN_OR_RETURN(port, ReservedPort(at.request, worker0, 0, "PET_RDZV_ENDPOINT"));
  }
  env.emplace_back("PET_RDZV_ENDPOINT", HostPort(host, port));
  env.emplace_back("PET_RDZV_BACKEND", e.rdzv_backend);
  env.emplace_back("PET_NNODES",
                   std::to_string(e.min_replicas) + ":" + std::to_string(e.max_replicas));
  if (e.max_restarts) env.emplace_back("PET_MAX_RESTARTS", std::to_string(*e.max_restarts));
  if (e.n_proc_per_node) env.emplace_back("PET_NPROC_PER_NODE", std::to_string(*e.n_proc_per_node));
  if (e.rdzv_id) env.emplace_back("PET_RDZV_ID", *e.rdzv_id);
  if (!e.rdzv_conf.empty()) {
    std::string conf;
    for (const auto& [k, v] : e.rdzv_conf) conf += (conf.empty() ? "" : ",") + k + "=" + v;
    env.emplace_back("PET_RDZV_CONF", conf);
  }
  if (e.standalone) env.emplace_back("PET_STANDALONE", "");
  return env;
}

}  // namespace

std::vector<uint32_t> PyTorchJobPorts(const trainjob::V1JobContract& c) {
  std::vector<uint32_t> ports(static_cast<size_t>(c.TotalReplicas()), 0);
  if (c.Find("Master") != nullptr) ports[0] = 1;
  const uint32_t worker0 = FirstWorkerRank(c);
  if (c.elastic && !c.elastic->rdzv_port && worker0 < ports.size()) ports[worker0] = 1;
  return ports;
}

Result<EnvList> PyTorchJobEnv(const ReplicaContext& at) {
  const trainjob::V1JobContract& c = at.contract;
  EnvList env = {{"PYTHONUNBUFFERED", "1"}};
  const int32_t total = c.TotalReplicas();
  if (c.Find("Master") != nullptr) {
    TRAINLET_ASSIGN_OR_RETURN(const uint32_t port, ReservedPort(at.request, 0, 0, "MASTER_PORT"));
    const std::string& addr = at.Address(0);
    env.emplace_back("MASTER_PORT", std::to_string(port));
    env.emplace_back("PET_MASTER_PORT", std::to_string(port));
    env.emplace_back("MASTER_ADDR", addr);
    env.emplace_back("PET_MASTER_ADDR", addr);
    const uint32_t rank = at.me.index + (at.me.replica->type == "Worker" ? 1u : 0u);
    env.emplace_back("WORLD_SIZE", std::to_string(total * NprocInt(c)));
    env.emplace_back("RANK", std::to_string(rank));
    env.emplace_back("PET_NODE_RANK", std::to_string(rank));
  }
  if (c.nproc_per_node) env.emplace_back("PET_NPROC_PER_NODE", *c.nproc_per_node);
  if (c.elastic) {
    TRAINLET_ASSIGN_OR_RETURN(EnvList elastic, ElasticEnv(at));
    env.insert(env.end(), elastic.begin(), elastic.end());
  } else {
    env.emplace_back("PET_NNODES", std::to_string(total));
  }
  return env;
}

}  // namespace trainlet
