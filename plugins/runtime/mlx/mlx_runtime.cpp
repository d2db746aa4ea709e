#include "plugins/runtime/mlx/mlx_runtime.h"

#include <nlohmann/json.hpp>

#include "plugins/runtime/builtin_runtime.h"
#include "plugins/runtime/worker_env.h"

namespace trainlet {
namespace {

constexpr std::string_view kProcsField = "spec.trainer.numProcPerNode";
constexpr uint32_t kMaxRingConnections = 16;

std::string AnnotationField(std::string_view key) {
  return "metadata.annotations[" + std::string(key) + "]";
}

class MlxRuntime final : public BuiltinRuntime {
 public:
  std::string_view name() const override { return "mlx"; }

  std::string LaunchMode(const PlanRequest& request) const override {
    auto backend = ChooseMlxBackend(request);
    if (backend.ok() && *backend == MlxBackend::kJaccl) {
      return "MLX jaccl (RDMA): one process per node with MLX_IBV_DEVICES and "
             "MLX_JACCL_COORDINATOR, started by the agents";
    }
    auto connections = MlxRingConnections(request);
    return "MLX ring: ranks started by the agents with MLX_HOSTFILE and MLX_RANK, " +
           std::to_string(connections.ok() ? *connections : 1) + " connection(s) per rank";
  }

 protected:
  // "auto" is 1: MLX runs one process per Mac, which uses the whole GPU.
  Result<uint32_t> CountProcs(std::string_view num_proc_per_node,
                              const v1::Topology*) const override {
    if (num_proc_per_node == "auto") return 1u;
    return ParseProcCount(num_proc_per_node, kProcsField, 1);
  }

  // Ports: the ring's, one per connection of each rank, on every node; jaccl's coordinator's
  // one on node rank 0.
  Result<AttemptLayout> LayOut(const PlanRequest& request) const override {
    if (request.argv.empty()) return InvalidError("spec.trainer.command: no command to run");
    if (request.nodes.empty()) return InvalidError("mlx plan: no nodes placed");
    TRAINLET_ASSIGN_OR_RETURN(const uint32_t per_node,
                              CountProcs(request.num_proc_per_node, nullptr));
    TRAINLET_ASSIGN_OR_RETURN(const MlxBackend backend, ChooseMlxBackend(request));
    AttemptLayout layout = RanksInNodeOrder(std::vector<uint32_t>(request.nodes.size(), per_node));
    if (backend == MlxBackend::kJaccl) {
      layout.nodes[0].ports = 1;
    } else {
      TRAINLET_ASSIGN_OR_RETURN(const uint32_t connections, MlxRingConnections(request));
      for (NodeLayout& node : layout.nodes) node.ports = per_node * connections;
    }
    return layout;
  }

  Result<std::vector<v1::LaunchPlan>> MakePlans(const PlanRequest& request,
                                                const AttemptLayout& layout) const override {
    TRAINLET_ASSIGN_OR_RETURN(const MlxBackend backend, ChooseMlxBackend(request));
    const uint32_t world = WorldSize(layout);
    std::vector<v1::LaunchPlan> plans = EmptyPlans(request);
    std::map<std::string, std::string> shared_env;
    v1::PlanFile file;
    if (backend == MlxBackend::kJaccl) {
      TRAINLET_ASSIGN_OR_RETURN(const uint32_t port,
                                ReservedPort(request, 0, 0, "MLX_JACCL_COORDINATOR"));
      shared_env["MLX_JACCL_COORDINATOR"] = HostPort(request.nodes[0].address, port);
      shared_env["MLX_IBV_DEVICES"] = "$(TRAINLET_WORK_DIR)/" + std::string(kMlxIbvDevicesName);
      file.set_path(std::string(kMlxIbvDevicesName));
      file.set_content(MlxIbvDevicesJson(request.nodes));
    } else {
      TRAINLET_ASSIGN_OR_RETURN(const uint32_t connections, MlxRingConnections(request));
      std::vector<std::vector<std::string>> hosts(world);
      for (uint32_t n = 0; n < plans.size(); ++n) {
        for (const LaidOutRank& r : layout.nodes[n].ranks) {
          for (uint32_t c = 0; c < connections; ++c) {
            TRAINLET_ASSIGN_OR_RETURN(
                const uint32_t port,
                ReservedPort(request, n, r.local_rank * connections + c,
                             "MLX_HOSTFILE (rank " + std::to_string(r.rank) + ")"));
            hosts.at(r.rank).push_back(HostPort(request.nodes[n].address, port));
          }
        }
      }
      shared_env["MLX_HOSTFILE"] = "$(TRAINLET_WORK_DIR)/" + std::string(kMlxHostfileName);
      file.set_path(std::string(kMlxHostfileName));
      file.set_content(MlxRingHostfileJson(hosts));
    }
    for (uint32_t n = 0; n < plans.size(); ++n) {
      *plans[n].add_files() = file;
      const auto& ranks = layout.nodes[n].ranks;
      for (const LaidOutRank& r : ranks) {
        v1::WorkerSpec* w = plans[n].add_workers();
        for (const auto& a : request.argv) w->add_argv(a);
        AddCommonWorkerEnv(
            request, {r.rank, r.local_rank, n, world, static_cast<uint32_t>(ranks.size())}, *w);
        auto& env = *w->mutable_env();
        for (const auto& [k, v] : shared_env) env[k] = v;
        env["MLX_RANK"] = std::to_string(r.rank);
      }
    }
    return plans;
  }
};

}  // namespace

Result<MlxBackend> ChooseMlxBackend(const PlanRequest& request) {
  std::string wanted = "auto";
  if (auto it = request.annotations.find(std::string(kMlxBackendAnnotation));
      it != request.annotations.end() && !it->second.empty()) {
    wanted = it->second;
  }
  if (wanted != "auto" && wanted != "ring" && wanted != "jaccl") {
    return InvalidError(AnnotationField(kMlxBackendAnnotation) +
                        ": must be ring, jaccl or auto, got \"" + wanted + "\"");
  }
  if (wanted == "ring") return MlxBackend::kRing;
  auto per_node = ParseProcCount(
      request.num_proc_per_node == "auto" ? "" : request.num_proc_per_node, kProcsField, 1);
  if (!per_node.ok()) return per_node.status();
  const PlacedNode* missing = nullptr;
  for (const auto& n : request.nodes) {
    if (RdmaDevices(n).empty()) {
      missing = &n;
      break;
    }
  }
  if (wanted == "auto") {
    const bool jaccl = request.nodes.size() > 1 && *per_node == 1 && missing == nullptr;
    return jaccl ? MlxBackend::kJaccl : MlxBackend::kRing;
  }
  if (*per_node != 1) {
    return InvalidError(
        std::string(kProcsField) + ": the jaccl backend runs one process per node (" +
        AnnotationField(kMlxBackendAnnotation) + " is jaccl), got " + std::to_string(*per_node));
  }
  if (missing != nullptr) {
    return InvalidError(AnnotationField(kMlxBackendAnnotation) +
                        ": jaccl needs RDMA devices, and node " + missing->name + " reports none");
  }
  return MlxBackend::kJaccl;
}

Result<uint32_t> MlxRingConnections(const PlanRequest& request) {
  auto it = request.annotations.find(std::string(kMlxRingConnectionsAnnotation));
  if (it == request.annotations.end() || it->second.empty()) return 1u;
  auto n = ParseProcCount(it->second, AnnotationField(kMlxRingConnectionsAnnotation), 1);
  if (!n.ok() || *n > kMaxRingConnections) {
    return InvalidError(AnnotationField(kMlxRingConnectionsAnnotation) +
                        ": must be an integer from 1 to " + std::to_string(kMaxRingConnections) +
                        ", got \"" + it->second + "\"");
  }
  return *n;
}

std::string MlxRingHostfileJson(const std::vector<std::vector<std::string>>& rank_addresses) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& addresses : rank_addresses) out.push_back(addresses);
  return out.dump(2) + "\n";
}

std::string MlxIbvDevicesJson(const std::vector<PlacedNode>& nodes) {
  nlohmann::json matrix = nlohmann::json::array();
  for (size_t i = 0; i < nodes.size(); ++i) {
    const std::vector<std::string> devices = RdmaDevices(nodes[i]);
    nlohmann::json row = nlohmann::json::array();
    for (size_t j = 0; j < nodes.size(); ++j) {
      const size_t peer = j < i ? j : j - 1;  // index among node i's peers
      if (i == j || devices.empty()) {
        row.push_back(nullptr);
      } else {
        row.push_back(devices[peer % devices.size()]);
      }
    }
    matrix.push_back(row);
  }
  // One row per line, so a person can read the matrix in the work dir.
  std::string out = "[\n";
  for (size_t i = 0; i < matrix.size(); ++i) {
    out += "  " + matrix[i].dump() + (i + 1 < matrix.size() ? ",\n" : "\n");
  }
  return out + "]\n";
}

std::unique_ptr<RuntimePlugin> MakeMlxRuntime() { return std::make_unique<MlxRuntime>(); }

}  // namespace trainlet
