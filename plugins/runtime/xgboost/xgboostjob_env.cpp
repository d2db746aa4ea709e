#include "plugins/runtime/xgboost/xgboostjob_env.h"

#include "plugins/runtime/worker_env.h"

namespace trainlet {

std::vector<uint32_t> XGBoostJobPorts(const trainjob::V1JobContract& c) {
  return std::vector<uint32_t>(static_cast<size_t>(c.TotalReplicas()), 1);
}

Result<EnvList> XGBoostJobEnv(const ReplicaContext& at) {
  const auto total = static_cast<uint32_t>(at.contract.TotalReplicas());
  TRAINLET_ASSIGN_OR_RETURN(const uint32_t master_port,
                            ReservedPort(at.request, 0, 0, "MASTER_PORT"));
  // The Master is rank 0, so a Worker's RANK (index + the one Master) is its rank.
  EnvList env = {{"MASTER_PORT", std::to_string(master_port)},
                 {"MASTER_ADDR", at.Address(0)},
                 {"WORLD_SIZE", std::to_string(total)},
                 {"RANK", std::to_string(at.me.rank)},
                 {"PYTHONUNBUFFERED", "1"}};
  if (total > 1) {
    const uint32_t port_node = at.me.rank == 0 ? 1u : at.me.rank;
    TRAINLET_ASSIGN_OR_RETURN(const uint32_t worker_port,
                              ReservedPort(at.request, port_node, 0, "WORKER_PORT"));
    std::string addrs;
    for (uint32_t i = 1; i < total; ++i) addrs += (addrs.empty() ? "" : ",") + at.Address(i);
    env.emplace_back("WORKER_PORT", std::to_string(worker_port));
    env.emplace_back("WORKER_ADDRS", addrs);
  }
  return env;
}

}  // namespace trainlet
