#include "plugins/runtime/mpi/mpi_runtime.h"

#include <algorithm>

#include "plugins/runtime/worker_env.h"

namespace trainlet {
namespace {

constexpr const char* kHostfile = "$(TRAINLET_WORK_DIR)/hostfile";

// True when no placed node reports an RDMA device (InfiniBand, RoCE, Omni-Path, EFA, ...).
bool TcpOnly(const PlanRequest& request) {
  return std::all_of(request.nodes.begin(), request.nodes.end(),
                     [](const PlacedNode& n) { return RdmaDevices(n).empty(); });
}

class MpiRuntime final : public RuntimePlugin {
 public:
  std::string_view name() const override { return "mpi"; }
  bool UsesExec() const override { return true; }

  Result<uint32_t> ProcsPerNode(std::string_view num_proc_per_node,
                                const v1::Topology*) const override {
    return ParseProcCount(num_proc_per_node, "spec.mlPolicy.mpi.numProcPerNode", 1);
  }

  std::string LaunchMode(const PlanRequest& request) const override {
    return "launcher (" + (request.argv.empty() ? std::string("?") : request.argv[0]) + ") on " +
           (request.nodes.empty() ? std::string("node rank 0") : request.nodes[0].name) +
           "; remote daemons started through trainlet-exec, no SSH";
  }

  Result<std::vector<v1::LaunchPlan>> Plan(const PlanRequest& request) const override {
    if (request.argv.empty()) return InvalidError("spec.trainer.command: no command to run");
    if (request.exec_endpoint.empty() || request.launcher_secret_key.empty()) {
      return InternalError("mpi plan without launcher credentials");
    }
    TRAINLET_ASSIGN_OR_RETURN(const uint32_t slots, ProcsPerNode(request.num_proc_per_node, nullptr));
    const auto nodes = static_cast<uint32_t>(request.nodes.size());
    std::vector<v1::LaunchPlan> plans(nodes);
    for (uint32_t n = 0; n < nodes; ++n) {
      plans[n].set_job(request.job);
      plans[n].set_attempt(request.attempt);
      plans[n].set_node_rank(n);
      plans[n].set_stop_grace_ms(request.stop_grace_ms);
    }
    v1::LaunchPlan& launcher_plan = plans[0];
    auto* file = launcher_plan.add_files();
    file->set_path("hostfile");
    file->set_content(MpiHostfile(request.nodes, slots));
    v1::WorkerSpec* launcher = launcher_plan.add_workers();
    for (const auto& a : request.argv) launcher->add_argv(a);
    AddCommonWorkerEnv(request, {0, 0, 0, nodes * slots, slots}, *launcher);
    AddExecCredentialEnv(request, *launcher);
    auto& env = *launcher->mutable_env();
    const std::string slots_text = std::to_string(slots);
    // OpenMPI 4.x (ORTE)
    env["OMPI_MCA_orte_default_hostfile"] = kHostfile;
    env["OMPI_MCA_orte_keep_fqdn_hostnames"] = "true";
    env["OMPI_MCA_orte_set_default_slots"] = slots_text;
    env["OMPI_MCA_plm_rsh_agent"] = "$(TRAINLET_EXEC)";
    // OpenMPI 5.x (PRRTE)
    env["PRTE_MCA_prte_default_hostfile"] = kHostfile;
    env["PRTE_MCA_prte_keep_fqdn_hostnames"] = "true";
    env["PRTE_MCA_prte_set_default_slots"] = slots_text;
    env["PRTE_MCA_plm_ssh_agent"] = "$(TRAINLET_EXEC)";
    env["TRAINLET_MPI_HOSTFILE"] = kHostfile;
    for (const auto& [name, value] : MpiTuningDefaults(request)) env.try_emplace(name, value);
    return plans;
  }
};

}  // namespace

std::string MpiHostfile(const std::vector<PlacedNode>& nodes, uint32_t slots) {
  std::string out;
  for (const auto& n : nodes) out += n.address + " slots=" + std::to_string(slots) + "\n";
  return out;
}

std::vector<std::pair<std::string, std::string>> MpiTuningDefaults(const PlanRequest& request) {
  std::vector<std::pair<std::string, std::string>> out;
  // Without an RDMA device, OpenMPI's selection ends at the ob1 PML (over the tcp BTL) anyway:
  // UCX wants mlx devices, the cm PML's MTLs want Omni-Path/TrueScale (psm2, psm) or a libfabric
  // provider other than tcp/sockets. Asking for ob1 skips loading and initialising them in every
  // rank (MPI_Init: ~230 ms by default, ~25 ms with ob1, on the bench VM). mpirun
  // forwards OMPI_MCA_* to the remote daemons and ranks, so this reaches every rank.
  if (TcpOnly(request)) out.emplace_back("OMPI_MCA_pml", "ob1");
  return out;
}

std::unique_ptr<RuntimePlugin> MakeMpiRuntime() { return std::make_unique<MpiRuntime>(); }

}  // namespace trainlet
