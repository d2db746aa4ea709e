#include "plugins/runtime/worker_env.h"

#include <charconv>

namespace trainlet {

void AddCommonWorkerEnv(const PlanRequest& request, const RankCoordinates& at,
                        v1::WorkerSpec& worker) {
  auto& env = *worker.mutable_env();
  for (const auto& [name, value] : request.env) env[name] = value;
  env["TRAINLET_JOB"] = request.job;
  env["TRAINLET_ATTEMPT"] = std::to_string(request.attempt);
  env["TRAINLET_RANK"] = std::to_string(at.rank);
  env["TRAINLET_WORLD_SIZE"] = std::to_string(at.world_size);
  env["TRAINLET_LOCAL_RANK"] = std::to_string(at.local_rank);
  env["TRAINLET_LOCAL_WORLD_SIZE"] = std::to_string(at.local_world_size);
  env["TRAINLET_NODE_RANK"] = std::to_string(at.node_rank);
  env["TRAINLET_NUM_NODES"] = std::to_string(request.nodes.size());
  worker.set_rank(at.rank);
  worker.set_local_rank(at.local_rank);
}

void AddExecCredentialEnv(const PlanRequest& request, v1::WorkerSpec& worker) {
  auto& env = *worker.mutable_env();
  env["TRAINLET_EXEC_ENDPOINT"] = request.exec_endpoint;
  env["TRAINLET_EXEC_SERVER_KEY"] = request.exec_server_key;
  env["TRAINLET_EXEC_PUBLIC_KEY"] = request.launcher_public_key;
  env["TRAINLET_EXEC_KEY"] = request.launcher_secret_key;
}

Result<uint32_t> ParseProcCount(std::string_view text, std::string_view field, uint32_t fallback) {
  if (text.empty()) return fallback;
  uint32_t n = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc() || end != text.data() + text.size() || n == 0 || n > 4096) {
    return InvalidError(std::string(field) + ": must be an integer from 1 to 4096, got \"" +
                        std::string(text) + "\"");
  }
  return n;
}

}  // namespace trainlet
