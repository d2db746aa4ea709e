#include "plugins/runtime/torch/torch_runtime.h"

#include <regex>

#include "plugins/runtime/worker_env.h"

namespace trainlet {
namespace {

constexpr std::string_view kProcsField = "spec.trainer.numProcPerNode";

std::string_view BaseName(std::string_view path) {
  const size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

class TorchRuntime final : public RuntimePlugin {
 public:
  std::string_view name() const override { return "torch"; }

  // "auto" without a topology (the coordinator sizes a job before it is placed) counts 1 per
  // node; Plan resolves it from each placed node's topology.
  Result<uint32_t> ProcsPerNode(std::string_view num_proc_per_node,
                                const v1::Topology* topology) const override {
    if (num_proc_per_node == "auto") return topology ? AutoProcsPerNode(*topology) : 1u;
    return ParseProcCount(num_proc_per_node, kProcsField, 1);
  }

  uint32_t PortsPerNode(const PlanRequest&, uint32_t node_rank) const override {
    return node_rank == 0 ? 1 : 0;  // MASTER_PORT
  }

  std::string LaunchMode(const PlanRequest& request) const override {
    if (IsTorchLauncher(request.argv)) {
      return "torchrun: one " + std::string(BaseName(request.argv[0])) +
             " per node, given PET_NNODES/PET_NPROC_PER_NODE/PET_NODE_RANK/PET_MASTER_*; it "
             "starts the node's ranks";
    }
    return "direct: ranks started by the agents with RANK/WORLD_SIZE/MASTER_ADDR env, no "
           "torchrun (a failed rank restarts the gang)";
  }

  Result<std::vector<v1::LaunchPlan>> Plan(const PlanRequest& request) const override {
    if (request.argv.empty()) return InvalidError("spec.trainer.command: no command to run");
    if (request.nodes.empty()) return InvalidError("torch plan: no nodes placed");
    TRAINLET_ASSIGN_OR_RETURN(const std::vector<uint32_t> procs,
                              ProcsOfNodes(request, kProcsField));
    TRAINLET_ASSIGN_OR_RETURN(const uint32_t master_port,
                              ReservedPort(request, 0, 0, "MASTER_PORT"));
    const std::string& master_addr = request.nodes[0].address;
    const RankLayout layout = LayOutRanks(procs);
    const auto nodes = static_cast<uint32_t>(request.nodes.size());
    const bool launcher = IsTorchLauncher(request.argv);

    std::vector<v1::LaunchPlan> plans = EmptyPlans(request);
    for (uint32_t n = 0; n < nodes; ++n) {
      // Kubeflow's PET_* go to every process: torchrun reads them, and scripts read
      // PET_NODE_RANK/PET_NNODES without torchrun too.
      const std::vector<std::pair<std::string, std::string>> pet = {
          {"PET_NNODES", std::to_string(nodes)},
          {"PET_NPROC_PER_NODE", std::to_string(procs[n])},
          {"PET_NODE_RANK", std::to_string(n)},
          {"PET_MASTER_ADDR", master_addr},
          {"PET_MASTER_PORT", std::to_string(master_port)},
      };
      if (launcher) {
        v1::WorkerSpec* w = plans[n].add_workers();
        for (const auto& a : request.argv) w->add_argv(a);
        AddCommonWorkerEnv(request, {n, 0, n, nodes, 1}, *w);
        for (const auto& [k, v] : pet) (*w->mutable_env())[k] = v;
        continue;
      }
      for (uint32_t l = 0; l < procs[n]; ++l) {
        const uint32_t rank = layout.first_rank[n] + l;
        v1::WorkerSpec* w = plans[n].add_workers();
        for (const auto& a : request.argv) w->add_argv(a);
        AddCommonWorkerEnv(request, {rank, l, n, layout.world_size, procs[n]}, *w);
        auto& env = *w->mutable_env();
        for (const auto& [k, v] : pet) env[k] = v;
        // What torchrun gives each worker it starts.
        env["RANK"] = std::to_string(rank);
        env["LOCAL_RANK"] = std::to_string(l);
        env["WORLD_SIZE"] = std::to_string(layout.world_size);
        env["LOCAL_WORLD_SIZE"] = std::to_string(procs[n]);
        env["GROUP_RANK"] = std::to_string(n);
        env["GROUP_WORLD_SIZE"] = std::to_string(nodes);
        env["ROLE_RANK"] = std::to_string(rank);
        env["ROLE_WORLD_SIZE"] = std::to_string(layout.world_size);
        env["MASTER_ADDR"] = master_addr;
        env["MASTER_PORT"] = std::to_string(master_port);
        env["TORCHELASTIC_RESTART_COUNT"] = std::to_string(request.attempt - 1);
      }
    }
    return plans;
  }
};

}  // namespace

bool IsTorchLauncher(const std::vector<std::string>& argv) {
  if (argv.empty()) return false;
  const std::string_view exe = BaseName(argv[0]);
  if (exe == "torchrun") return true;
  if (exe == "tune") return argv.size() > 1 && argv[1] == "run";
  static const std::regex kPython("python([0-9]+(\\.[0-9]+)?)?");
  if (!std::regex_match(std::string(exe), kPython)) return false;
  // Interpreter options come before -m; the first other argument is the script.
  for (size_t i = 1; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (a == "-m") return i + 1 < argv.size() && argv[i + 1] == "torch.distributed.run";
    if (a.starts_with("-m")) return a.substr(2) == "torch.distributed.run";
    if (a == "-c" || a == "-" || !a.starts_with("-")) return false;
    if (a == "-W" || a == "-X" || a == "--check-hash-based-pycs") ++i;  // options with a value
  }
  return false;
}

std::unique_ptr<RuntimePlugin> MakeTorchRuntime() { return std::make_unique<TorchRuntime>(); }

}  // namespace trainlet
