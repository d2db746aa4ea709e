#include "plugins/runtime/mlx/mlx_runtime.h"

#include <algorithm>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>

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
    if (backend.ok() && *backend == MlxBackend::kJacclRing) {
      return "MLX jaccl-ring (RDMA ring): one process per node with MLX_JACCL_RING=1, "
             "MLX_IBV_DEVICES and MLX_JACCL_COORDINATOR, started by the agents";
    }
    if (backend.ok() && *backend == MlxBackend::kNccl) {
      return "MLX nccl (CUDA): ranks started by the agents with NCCL_HOST_IP, NCCL_PORT, "
             "MLX_RANK, MLX_WORLD_SIZE and one GPU each";
    }
    auto connections = MlxRingConnections(request);
    return "MLX ring: ranks started by the agents with MLX_HOSTFILE and MLX_RANK, " +
           std::to_string(connections.ok() ? *connections : 1) + " connection(s) per rank";
  }

 protected:
  // "auto" is 1: MLX runs one process per Mac, which uses the whole GPU. (Also for nccl: the
  // coordinator sizes a job before it knows the backend, so nccl's ranks per node are written.)
  Result<uint32_t> CountProcs(std::string_view num_proc_per_node,
                              const v1::Topology*) const override {
    if (num_proc_per_node == "auto") return 1u;
    return ParseProcCount(num_proc_per_node, kProcsField, 1);
  }

  // Ports: the ring's, one per connection of each rank, on every node; jaccl's (and
  // jaccl-ring's) coordinator's or NCCL's bootstrap one on node rank 0.
  Result<AttemptLayout> LayOut(const PlanRequest& request) const override {
    if (request.argv.empty()) return InvalidError("spec.trainer.command: no command to run");
    if (request.nodes.empty()) return InvalidError("mlx plan: no nodes placed");
    TRAINLET_ASSIGN_OR_RETURN(const uint32_t per_node,
                              CountProcs(request.num_proc_per_node, nullptr));
    TRAINLET_ASSIGN_OR_RETURN(const MlxBackend backend, ChooseMlxBackend(request));
    AttemptLayout layout = RanksInNodeOrder(std::vector<uint32_t>(request.nodes.size(), per_node));
    if (backend != MlxBackend::kRing) {  // the jaccl coordinator's or NCCL's one port
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
    std::optional<v1::PlanFile> file;
    if (backend == MlxBackend::kNccl) {
      TRAINLET_ASSIGN_OR_RETURN(const uint32_t port, ReservedPort(request, 0, 0, "NCCL_PORT"));
      shared_env["NCCL_HOST_IP"] = request.nodes[0].address;
      shared_env["NCCL_PORT"] = std::to_string(port);
      shared_env["MLX_WORLD_SIZE"] = std::to_string(world);
      // The GPU index means the same as in the agent's binding and the nvidia plugin's.
      shared_env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID";
    } else if (backend != MlxBackend::kRing) {
      TRAINLET_ASSIGN_OR_RETURN(const uint32_t port,
                                ReservedPort(request, 0, 0, "MLX_JACCL_COORDINATOR"));
      shared_env["MLX_JACCL_COORDINATOR"] = HostPort(request.nodes[0].address, port);
      shared_env["MLX_IBV_DEVICES"] = "$(TRAINLET_WORK_DIR)/" + std::string(kMlxIbvDevicesName);
      if (backend == MlxBackend::kJacclRing) shared_env["MLX_JACCL_RING"] = "1";
      file.emplace();
      file->set_path(std::string(kMlxIbvDevicesName));
      file->set_content(MlxIbvDevicesJson(request.nodes, backend == MlxBackend::kJacclRing));
    } else {
      TRAINLET_ASSIGN_OR_RETURN(std::string hostfile, RingHostfile(request, layout));
      shared_env["MLX_HOSTFILE"] = "$(TRAINLET_WORK_DIR)/" + std::string(kMlxHostfileName);
      file.emplace();
      file->set_path(std::string(kMlxHostfileName));
      file->set_content(std::move(hostfile));
    }
    for (uint32_t n = 0; n < plans.size(); ++n) {
      if (file) *plans[n].add_files() = *file;
      const auto& ranks = layout.nodes[n].ranks;
      const auto local_world = static_cast<uint32_t>(ranks.size());
      for (const LaidOutRank& r : ranks) {
        v1::WorkerSpec* w = plans[n].add_workers();
        for (const auto& a : request.argv) w->add_argv(a);
        AddCommonWorkerEnv(request, {r.rank, r.local_rank, n, world, local_world}, *w);
        auto& env = *w->mutable_env();
        for (const auto& [k, v] : shared_env) env[k] = v;
        env["MLX_RANK"] = std::to_string(r.rank);
        if (backend == MlxBackend::kNccl) {
          const uint32_t gpus = CudaGpus(request.nodes[n]);
          env["CUDA_VISIBLE_DEVICES"] =
              std::to_string(NcclRankGpu(r.local_rank, local_world, gpus));
        }
      }
    }
    return plans;
  }

 private:
  // MLX's ring hostfile for the layout: each rank's node address with the ports its agent
  // reserved, `connections` of them per rank.
  static Result<std::string> RingHostfile(const PlanRequest& request, const AttemptLayout& layout) {
    TRAINLET_ASSIGN_OR_RETURN(const uint32_t connections, MlxRingConnections(request));
    std::vector<std::vector<std::string>> hosts(WorldSize(layout));
    for (uint32_t n = 0; n < layout.nodes.size(); ++n) {
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
    return MlxRingHostfileJson(hosts);
  }
};

}  // namespace

namespace {

// The first placed node for which `lacks` is true, or nullptr.
template <typename Pred>
const PlacedNode* FirstNodeThat(const PlanRequest& request, Pred lacks) {
  for (const auto& n : request.nodes) {
    if (lacks(n)) return &n;
  }
  return nullptr;
}

// jaccl and jaccl-ring: one process per node, RDMA devices on every node.
Result<MlxBackend> CheckJaccl(const PlanRequest& request, MlxBackend backend,
                              std::string_view wanted, uint32_t per_node) {
  if (per_node != 1) {
    return InvalidError(std::string(kProcsField) + ": the " + std::string(wanted) +
                        " backend runs one process per node (" +
                        AnnotationField(kMlxBackendAnnotation) + " is " + std::string(wanted) +
                        "), got " + std::to_string(per_node));
  }
  if (const PlacedNode* missing =
          FirstNodeThat(request, [](const PlacedNode& n) { return RdmaDevices(n).empty(); })) {
    return InvalidError(AnnotationField(kMlxBackendAnnotation) + ": " + std::string(wanted) +
                        " needs RDMA devices, and node " + missing->name + " reports none");
  }
  return backend;
}

}  // namespace

Result<MlxBackend> ChooseMlxBackend(const PlanRequest& request) {
  std::string wanted = "auto";
  if (auto it = request.annotations.find(std::string(kMlxBackendAnnotation));
      it != request.annotations.end() && !it->second.empty()) {
    wanted = it->second;
  }
  if (wanted != "auto" && wanted != "ring" && wanted != "jaccl" && wanted != "jaccl-ring" &&
      wanted != "nccl") {
    return InvalidError(AnnotationField(kMlxBackendAnnotation) +
                        ": must be ring, jaccl, jaccl-ring, nccl or auto, got \"" + wanted + "\"");
  }
  if (wanted == "ring") return MlxBackend::kRing;
  auto per_node = ParseProcCount(
      request.num_proc_per_node == "auto" ? "" : request.num_proc_per_node, kProcsField, 1);
  if (!per_node.ok()) return per_node.status();
  const PlacedNode* without_cuda =
      FirstNodeThat(request, [](const PlacedNode& n) { return CudaGpus(n) == 0; });
  if (wanted == "nccl") {
    if (without_cuda != nullptr) {
      return InvalidError(AnnotationField(kMlxBackendAnnotation) +
                          ": nccl needs CUDA (NVIDIA) GPUs, and node " + without_cuda->name +
                          " reports none");
    }
    return MlxBackend::kNccl;
  }
  if (wanted == "jaccl") return CheckJaccl(request, MlxBackend::kJaccl, wanted, *per_node);
  if (wanted == "jaccl-ring") return CheckJaccl(request, MlxBackend::kJacclRing, wanted, *per_node);
  // auto. MLX on Linux CUDA nodes is built with NCCL (and jaccl is macOS-only), as mlx.launch
  // picks nccl wherever CUDA is available.
  if (!request.nodes.empty() && without_cuda == nullptr) return MlxBackend::kNccl;
  const bool rdma_everywhere =
      FirstNodeThat(request, [](const PlacedNode& n) { return RdmaDevices(n).empty(); }) == nullptr;
  const bool jaccl = request.nodes.size() > 1 && *per_node == 1 && rdma_everywhere;
  return jaccl ? MlxBackend::kJaccl : MlxBackend::kRing;
}

uint32_t CudaGpus(const PlacedNode& node) {
  constexpr uint32_t kNvidiaPciVendor = 0x10de;
  uint32_t count = 0;
  for (const auto& g : node.topology.gpus()) {
    if (g.vendor() == "nvidia" || g.vendor_id() == kNvidiaPciVendor) ++count;
  }
  return count;
}

uint32_t NcclRankGpu(uint32_t local_rank, uint32_t local_ranks, uint32_t gpus) {
  if (gpus == 0 || local_ranks == 0) return 0;
  return static_cast<uint32_t>(uint64_t{local_rank} * gpus / local_ranks);
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

std::vector<std::vector<std::vector<std::string>>> MlxIbvDeviceMatrix(
    const std::vector<PlacedNode>& nodes, bool ring) {
  const size_t n = nodes.size();
  // Node i's peers, in node-rank order: every other node (mesh), or its ring neighbours.
  const auto peers_of = [&](size_t i) {
    std::vector<size_t> peers;
    for (size_t j = 0; j < n; ++j) {
      const bool neighbour = j == (i + 1) % n || (j + 1) % n == i;
      if (j != i && (!ring || neighbour)) peers.push_back(j);
    }
    return peers;
  };
  // Devices per peer: as many as a node has for each (at least 1, reusing devices when it has
  // fewer than peers). A ring takes the smallest over the nodes: MLX wants every node to reach
  // its neighbours over the same number of connections.
  const auto per_peer = [&](size_t i) -> size_t {
    const size_t d = RdmaDevices(nodes[i]).size(), p = peers_of(i).size();
    return p == 0 || d <= p ? 1 : d / p;
  };
  size_t ring_count = SIZE_MAX;
  for (size_t i = 0; ring && i < n; ++i) ring_count = std::min(ring_count, per_peer(i));
  std::vector<std::vector<std::vector<std::string>>> matrix(
      n, std::vector<std::vector<std::string>>(n));
  for (size_t i = 0; i < n; ++i) {
    const std::vector<std::string> devices = RdmaDevices(nodes[i]);
    if (devices.empty()) continue;
    const std::vector<size_t> peers = peers_of(i);
    const size_t count = ring ? ring_count : per_peer(i);
    for (size_t k = 0; k < peers.size(); ++k) {
      // Dealt in turn: device k faces peer k, device k + P peer k again, and so on.
      for (size_t m = 0; m < count; ++m) {
        matrix[i][peers[k]].push_back(devices[(k + m * peers.size()) % devices.size()]);
      }
    }
  }
  return matrix;
}

std::string MlxIbvDevicesJson(const std::vector<PlacedNode>& nodes, bool ring) {
  std::string out = "[\n";
  const auto matrix = MlxIbvDeviceMatrix(nodes, ring);
  for (size_t i = 0; i < matrix.size(); ++i) {
    nlohmann::json row = nlohmann::json::array();
    for (const auto& devices : matrix[i]) {
      // null, one name, or a list of names: MLX's hostfile `rdma` entries take all three.
      if (devices.empty()) {
        row.push_back(nullptr);
      } else if (devices.size() == 1) {
        row.push_back(devices[0]);
      } else {
        row.push_back(devices);
      }
    }
    // One row per line, so a person can read the matrix in the work dir.
    out += "  " + row.dump() + (i + 1 < matrix.size() ? ",\n" : "\n");
  }
  return out + "]\n";
}

std::unique_ptr<RuntimePlugin> MakeMlxRuntime() { return std::make_unique<MlxRuntime>(); }

}  // namespace trainlet
