#include "plugins/runtime/worker_env.h"

#include <algorithm>
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

namespace trainlet {

std::vector<v1::LaunchPlan> EmptyPlans(const PlanRequest& request) {
  std::vector<v1::LaunchPlan> plans(request.nodes.size());
  for (size_t n = 0; n < plans.size(); ++n) {
    plans[n].set_job(request.job);
    plans[n].set_attempt(request.attempt);
    plans[n].set_node_rank(static_cast<uint32_t>(n));
    plans[n].set_stop_grace_ms(request.stop_grace_ms);
  }
  return plans;
}

std::string HostPort(std::string_view address, uint32_t port) {
  const bool v6 = address.find(':') != std::string_view::npos && !address.starts_with('[');
  std::string out = v6 ? "[" + std::string(address) + "]" : std::string(address);
  return out + ":" + std::to_string(port);
}

Result<uint32_t> ReservedPort(const PlanRequest& request, uint32_t node_rank, uint32_t index,
                              std::string_view what) {
  if (node_rank >= request.nodes.size()) {
    return InvalidError(std::string(what) + ": no node rank " + std::to_string(node_rank) +
                        " in a placement of " + std::to_string(request.nodes.size()) + " nodes");
  }
  const PlacedNode& node = request.nodes[node_rank];
  if (index >= node.ports.size() || node.ports[index] == 0) {
    return InvalidError(std::string(what) + ": no port reserved on node rank " +
                        std::to_string(node_rank) + " (" + node.name +
                        "): " + std::to_string(node.ports.size()) + " reserved, port #" +
                        std::to_string(index + 1) + " needed (the node's agent reserves them)");
  }
  return node.ports[index];
}

uint32_t AutoProcsPerNode(const v1::Topology& topology) {
  if (topology.gpus_size() > 0) return static_cast<uint32_t>(topology.gpus_size());
  if (topology.pus() > 0) return topology.pus();
  return std::max<uint32_t>(topology.cores(), 1);
}

Result<std::vector<uint32_t>> ProcsOfNodes(const PlanRequest& request, std::string_view field) {
  std::vector<uint32_t> procs(request.nodes.size(), 1);
  if (request.num_proc_per_node == "auto") {
    for (size_t n = 0; n < procs.size(); ++n)
      procs[n] = AutoProcsPerNode(request.nodes[n].topology);
    return procs;
  }
  TRAINLET_ASSIGN_OR_RETURN(const uint32_t fixed,
                            ParseProcCount(request.num_proc_per_node, field, 1));
  std::fill(procs.begin(), procs.end(), fixed);
  return procs;
}

RankLayout LayOutRanks(const std::vector<uint32_t>& procs) {
  RankLayout layout;
  layout.procs = procs;
  for (uint32_t p : procs) {
    layout.first_rank.push_back(layout.world_size);
    layout.world_size += p;
  }
  return layout;
}

AttemptLayout RanksInNodeOrder(const std::vector<uint32_t>& procs) {
  AttemptLayout layout;
  uint32_t next = 0;
  for (uint32_t count : procs) {
    NodeLayout& node = layout.nodes.emplace_back();
    for (uint32_t l = 0; l < count; ++l) node.ranks.push_back({next++, l});
  }
  return layout;
}

uint32_t WorldSize(const AttemptLayout& layout) {
  uint32_t world = 0;
  for (const NodeLayout& node : layout.nodes) world += static_cast<uint32_t>(node.ranks.size());
  return world;
}

bool IsVerbsDeviceName(std::string_view name) {
  // Prefixes of the kernel's (and macOS's) ibverbs device names, by driver. Network interfaces
  // (eth0, ens1f0, ib0 for IPoIB) are deliberately absent: they are not verbs devices.
  static constexpr std::string_view kPrefixes[] = {
      "mlx4_",  "mlx5_", "rdma_",  "hfi1_",      "qib",    "bnxt_re", "irdma",
      "i40iw",  "rxe",   "siw",    "efa_",       "erdma_", "ionic_",  "hns_",
      "ocrdma", "qedr",  "cxgb4_", "vmw_pvrdma", "mana_",  "mthca"};
  for (std::string_view p : kPrefixes) {
    if (name.size() > p.size() && name.starts_with(p)) return true;
  }
  return false;
}

std::vector<std::string> RdmaDevices(const PlacedNode& node) {
  if (!node.rdma_devices.empty()) return node.rdma_devices;
  std::vector<std::string> out;
  for (const auto& nic : node.topology.nics()) {
    for (const auto& dev : nic.os_devices()) {
      if (IsVerbsDeviceName(dev)) out.push_back(dev);
    }
  }
  return out;
}

Status CheckReservedEnv(const PlanRequest& request, std::string_view runtime,
                        const std::vector<std::string_view>& reserved) {
  for (const auto& [name, value] : request.env) {
    for (std::string_view r : reserved) {
      if (name == r) {
        return InvalidError("spec.trainer.env: " + name + " is reserved for the " +
                            std::string(runtime) + " runtime (trainlet sets it)");
      }
    }
  }
  return Status::Ok();
}

}  // namespace trainlet
