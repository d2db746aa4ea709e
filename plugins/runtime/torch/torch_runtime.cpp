#include "plugins/runtime/torch/torch_runtime.h"

#include <algorithm>
#include <regex>

#include "plugins/runtime/builtin_runtime.h"
#include "plugins/runtime/torch/pytorchjob_env.h"
#include "plugins/runtime/worker_env.h"

namespace trainlet {
namespace {

constexpr std::string_view kProcsField = "spec.trainer.numProcPerNode";

std::string_view BaseName(std::string_view path) {
  const size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

class TorchRuntime final : public BuiltinRuntime {
 public:
  std::string_view name() const override { return "torch"; }

  std::string LaunchMode(const PlanRequest& request) const override {
    if (auto c = ContractOf(request, trainjob::V1Kind::kPyTorchJob); c.ok() && c->has_value()) {
      return "PyTorchJob: one process per replica, each with its own command and the Training "
             "Operator's MASTER_ADDR/MASTER_PORT/WORLD_SIZE/RANK/PET_* env";
    }
    if (IsTorchLauncher(request.argv)) {
      return "torchrun: one " + std::string(BaseName(request.argv[0])) +
             " per node, given PET_NNODES/PET_NPROC_PER_NODE/PET_NODE_RANK/PET_MASTER_*; it "
             "starts the node's ranks";
    }
    return "direct: ranks started by the agents with RANK/WORLD_SIZE/MASTER_ADDR env, no "
           "torchrun (a failed rank restarts the gang)";
  }

 protected:
  // "auto" without a topology (the coordinator sizes a job before it is placed) counts 1 per
  // node; the layout resolves it from each placed node's topology.
  Result<uint32_t> CountProcs(std::string_view num_proc_per_node,
                              const v1::Topology* topology) const override {
    if (num_proc_per_node == "auto") return topology ? AutoProcsPerNode(*topology) : 1u;
    return ParseProcCount(num_proc_per_node, kProcsField, 1);
  }

  // A torch launcher is one worker per node (rank = node rank), which starts the node's ranks;
  // otherwise the agents start every rank. MASTER_PORT is reserved on node rank 0.
  Result<AttemptLayout> LayOut(const PlanRequest& request) const override {
    if (request.argv.empty()) return InvalidError("spec.trainer.command: no command to run");
    if (request.nodes.empty()) return InvalidError("torch plan: no nodes placed");
    TRAINLET_ASSIGN_OR_RETURN(auto contract, ContractOf(request, trainjob::V1Kind::kPyTorchJob));
    if (contract) return LayOutReplicas(request, *contract, PyTorchJobPorts(*contract));
    TRAINLET_ASSIGN_OR_RETURN(std::vector<uint32_t> procs, ProcsOfNodes(request, kProcsField));
    if (IsTorchLauncher(request.argv)) std::fill(procs.begin(), procs.end(), 1u);
    AttemptLayout layout = RanksInNodeOrder(procs);
    layout.nodes[0].ports = 1;
    return layout;
  }

  Result<std::vector<v1::LaunchPlan>> MakePlans(const PlanRequest& request,
                                                const AttemptLayout& layout) const override {
    TRAINLET_ASSIGN_OR_RETURN(auto contract, ContractOf(request, trainjob::V1Kind::kPyTorchJob));
    if (contract) return MakeReplicaPlans(request, *contract, layout, &PyTorchJobEnv);
    TRAINLET_ASSIGN_OR_RETURN(const std::vector<uint32_t> procs,
                              ProcsOfNodes(request, kProcsField));
    TRAINLET_ASSIGN_OR_RETURN(const uint32_t master_port,
                              ReservedPort(request, 0, 0, "MASTER_PORT"));
    const std::string& master_addr = request.nodes[0].address;
    const uint32_t world = WorldSize(layout);
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
      const auto& ranks = layout.nodes[n].ranks;
      const auto local_world = static_cast<uint32_t>(ranks.size());
      for (const LaidOutRank& r : ranks) {
        v1::WorkerSpec* w = plans[n].add_workers();
        for (const auto& a : request.argv) w->add_argv(a);
        AddCommonWorkerEnv(request, {r.rank, r.local_rank, n, world, local_world}, *w);
        auto& env = *w->mutable_env();
        for (const auto& [k, v] : pet) env[k] = v;
        if (launcher) continue;
        // What torchrun gives each worker it starts.
        env["RANK"] = std::to_string(r.rank);
        env["LOCAL_RANK"] = std::to_string(r.local_rank);
        env["WORLD_SIZE"] = std::to_string(world);
        env["LOCAL_WORLD_SIZE"] = std::to_string(local_world);
        env["GROUP_RANK"] = std::to_string(n);
        env["GROUP_WORLD_SIZE"] = std::to_string(nodes);
        env["ROLE_RANK"] = std::to_string(r.rank);
        env["ROLE_WORLD_SIZE"] = std::to_string(world);
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
