#include "plugins/runtime/mpi/mpi_runtime.h"

#include <arpa/inet.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <cstdint>
#include <sstream>
#include <string_view>

#include "plugins/runtime/builtin_runtime.h"
#include "plugins/runtime/mpi/mpi_direct_launch.h"
#include "plugins/runtime/v1_replica_plans.h"
#include "plugins/runtime/worker_env.h"

namespace trainlet {
namespace {

constexpr const char* kHostfile = "$(TRAINLET_WORK_DIR)/hostfile";

// True when no placed node reports an RDMA device (InfiniBand, RoCE, Omni-Path, EFA, ...).
bool TcpOnly(const PlanRequest& request) {
  return std::all_of(request.nodes.begin(), request.nodes.end(),
                     [](const PlacedNode& n) { return RdmaDevices(n).empty(); });
}

// The if_include parameters MpiTcpNetworkDefaults sets, each with the exclude that rules it out.
struct TcpInterfaceParam {
  std::string_view include;
  std::string_view exclude;
};
constexpr TcpInterfaceParam kTcpInterfaceParams[] = {
    {"btl_tcp_if_include", "btl_tcp_if_exclude"},
    {"oob_tcp_if_include", "oob_tcp_if_exclude"},
};

// Whether the trainer sets MCA parameter `param` itself: OMPI_MCA_<param> in the trainer env, or
// in the command as `--mca <param> V` (also -mca, --gmca, -gmca) or `OMPI_MCA_<param>=V`, also
// inside one argument such as `sh -c "mpirun --mca <param> V ..."`. Only those forms count: a
// command that merely mentions the name (echo $OMPI_MCA_<param>) does not.
bool TrainerSetsMcaParam(const PlanRequest& request, std::string_view param) {
  const std::string var = "OMPI_MCA_" + std::string(param);
  const auto in_env = [&](const auto& entry) { return entry.first == var; };
  if (std::any_of(request.env.begin(), request.env.end(), in_env)) return true;
  std::vector<std::string> words;
  for (const auto& arg : request.argv) {
    std::istringstream split(arg);
    for (std::string w; split >> w;) words.push_back(w);
  }
  for (size_t i = 0; i < words.size(); ++i) {
    const std::string& w = words[i];
    const bool mca_flag = w == "--mca" || w == "-mca" || w == "--gmca" || w == "-gmca";
    if (mca_flag && i + 1 < words.size() && words[i + 1] == param) return true;
    if (w.rfind(var + "=", 0) == 0) return true;
  }
  return false;
}

// The launcher env for OpenMPI: its hostfile, default slots and rsh agent for ORTE (4.x) and
// PRRTE (5.x), then the tuning the trainer env does not set itself.
void AddOpenMpiEnv(const PlanRequest& request, uint32_t slots,
                   google::protobuf::Map<std::string, std::string>& env) {
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
  for (const auto& [name, value] : MpiTuningDefaults(request)) env.try_emplace(name, value);
  for (const auto& [name, value] : MpiTcpNetworkDefaults(request)) env.try_emplace(name, value);
  for (const auto& [name, value] : MpiBindingDefaults(request)) env.try_emplace(name, value);
}

class MpiRuntime final : public BuiltinRuntime {
 public:
  std::string_view name() const override { return "mpi"; }

  std::string LaunchMode(const PlanRequest& request) const override {
    if (const auto direct = WantsDirectLaunch(request); direct.ok() && *direct) {
      const std::string key(kMpiLaunchAnnotation);
      const auto set = [&](const auto& m) { return m.contains(key) && !m.at(key).empty(); };
      const bool asked = set(request.annotations) || set(request.labels);
      return std::string("ranks started directly, PMIx (trainlet-pmix on every node; no mpirun") +
             (asked ? ")"
                    : "; the command starts no launcher, annotate " + key + ": mpirun " +
                          "for mpirun)");
    }
    const auto impl = ChooseMpiImplementation(request);
    const bool hydra = impl.ok() && *impl != MpiImplementation::kOpenMpi;
    return "launcher (" + (request.argv.empty() ? std::string("?") : request.argv[0]) + ") on " +
           (request.nodes.empty() ? std::string("node rank 0") : request.nodes[0].name) + "; " +
           (hydra ? std::string(MpiImplementationName(*impl)) + " hydra proxies"
                  : std::string("remote daemons")) +
           " started through trainlet-exec, no SSH";
  }

 protected:
  Result<uint32_t> CountProcs(std::string_view num_proc_per_node,
                              const v1::Topology*) const override {
    return ParseProcCount(num_proc_per_node, "spec.mlPolicy.mpi.numProcPerNode", 1);
  }

  // One worker, the launcher (rank 0 on node rank 0), which starts the rest through
  // trainlet-exec; the other nodes run nothing until it asks. Direct launch (mpi_direct_launch.h):
  // numProcPerNode ranks on every node, in node-rank order.
  Result<AttemptLayout> LayOut(const PlanRequest& request) const override {
    if (request.argv.empty()) return InvalidError("spec.trainer.command: no command to run");
    TRAINLET_RETURN_IF_ERROR(CountProcs(request.num_proc_per_node, nullptr).status());
    TRAINLET_RETURN_IF_ERROR(ChooseMpiImplementation(request).status());
    TRAINLET_RETURN_IF_ERROR(ContractOf(request, trainjob::V1Kind::kMPIJob).status());
    if (request.nodes.empty()) return InvalidError("mpi plan: no nodes placed");
    TRAINLET_ASSIGN_OR_RETURN(const bool direct, WantsDirectLaunch(request));
    if (direct) {
      TRAINLET_ASSIGN_OR_RETURN(const uint32_t slots,
                                CountProcs(request.num_proc_per_node, nullptr));
      return RanksInNodeOrder(std::vector<uint32_t>(request.nodes.size(), slots));
    }
    AttemptLayout layout;
    layout.nodes.resize(request.nodes.size());
    layout.nodes[0].ranks.push_back({0, 0});
    layout.exec_launcher_rank = 0;
    return layout;
  }

  // The launcher's TRAINLET_EXEC_* credentials are added by the coordinator, not here.
  Result<std::vector<v1::LaunchPlan>> MakePlans(const PlanRequest& request,
                                                const AttemptLayout&) const override {
    TRAINLET_ASSIGN_OR_RETURN(const uint32_t slots, CountProcs(request.num_proc_per_node, nullptr));
    TRAINLET_ASSIGN_OR_RETURN(const MpiImplementation impl, ChooseMpiImplementation(request));
    TRAINLET_ASSIGN_OR_RETURN(const bool direct, WantsDirectLaunch(request));
    if (direct) return DirectPlans(request, slots);
    const auto nodes = static_cast<uint32_t>(request.nodes.size());
    std::vector<v1::LaunchPlan> plans = EmptyPlans(request);
    if (plans.empty()) return InvalidError("mpi plan: no nodes placed");
    v1::LaunchPlan& launcher_plan = plans[0];
    const bool hydra = impl != MpiImplementation::kOpenMpi;
    auto* file = launcher_plan.add_files();
    file->set_path("hostfile");
    file->set_content(hydra ? HydraHostfile(request.nodes, slots)
                            : MpiHostfile(request.nodes, slots));
    v1::WorkerSpec* launcher = launcher_plan.add_workers();
    for (const auto& a : request.argv) launcher->add_argv(a);
    AddCommonWorkerEnv(request, {0, 0, 0, nodes * slots, slots}, *launcher);
    auto& env = *launcher->mutable_env();
    env["TRAINLET_MPI_HOSTFILE"] = kHostfile;
    if (hydra) {
      for (const auto& [name, value] : HydraLauncherEnv(impl, slots)) env[name] = value;
    } else {
      AddOpenMpiEnv(request, slots, env);
    }
    // A converted MPIJob: the role mpi-operator gives its launcher (the hostfile variables are the
    // ones above; mpiImplementation comes as the trainlet.io/mpi-implementation annotation).
    TRAINLET_ASSIGN_OR_RETURN(auto contract, ContractOf(request, trainjob::V1Kind::kMPIJob));
    if (contract) env["K_MPI_JOB_ROLE"] = "launcher";
    return plans;
  }
};

}  // namespace

Result<MpiImplementation> ChooseMpiImplementation(const PlanRequest& request) {
  // The TrainJob's annotation, else the runtime's label of the same key: PlanRequest carries a
  // runtime's labels, and a runtime is where a cluster's MPICH images are described once.
  const std::string key(kMpiImplementationAnnotation);
  auto it = request.annotations.find(key);
  std::string field = "metadata.annotations[" + key + "]";
  if (it == request.annotations.end() || it->second.empty()) {
    it = request.labels.find(key);
    field = "runtime metadata.labels[" + key + "]";
    if (it == request.labels.end() || it->second.empty()) return MpiImplementation::kOpenMpi;
  }
  // Compared without case: MPIJob spells them OpenMPI, Intel, MPICH; people write mpich.
  const auto is = [&](std::string_view want) {
    return std::equal(it->second.begin(), it->second.end(), want.begin(), want.end(),
                      [](char a, char b) { return std::tolower(a) == std::tolower(b); });
  };
  for (const auto impl :
       {MpiImplementation::kOpenMpi, MpiImplementation::kMpich, MpiImplementation::kIntel}) {
    if (is(MpiImplementationName(impl))) return impl;
  }
  return InvalidError(field + ": must be OpenMPI, MPICH or Intel, got \"" + it->second + "\"");
}

std::string_view MpiImplementationName(MpiImplementation impl) {
  switch (impl) {
    case MpiImplementation::kOpenMpi:
      return "OpenMPI";
    case MpiImplementation::kMpich:
      return "MPICH";
    case MpiImplementation::kIntel:
      return "Intel";
  }
  return "OpenMPI";
}

std::string HydraHostfile(const std::vector<PlacedNode>& nodes, uint32_t slots) {
  std::string out;
  for (const auto& n : nodes) {
    // hydra splits each line at ':' (host:procs), so an IPv6 address cannot stand in it; the
    // node's host name, which trainlet-exec accepts as well, must then resolve on the nodes.
    const bool ipv6 = n.address.find(':') != std::string::npos;
    const std::string& host = !ipv6 ? n.address : (n.hostname.empty() ? n.name : n.hostname);
    out += host + ":" + std::to_string(slots) + "\n";
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> HydraLauncherEnv(MpiImplementation impl,
                                                                  uint32_t slots) {
  // hydra runs `<exec> <host> "<path of hydra_pmi_proxy>" <proxy args...>` for every host that is
  // not the launcher's own (that one it forks); trainlet-exec takes it as an rsh command line.
  if (impl == MpiImplementation::kIntel) {
    // Intel MPI's hydra reads its own I_MPI_HYDRA_* names; I_MPI_PERHOST as mpi-operator sets it.
    return {{"I_MPI_HYDRA_HOST_FILE", kHostfile},
            {"I_MPI_HYDRA_BOOTSTRAP", "rsh"},
            {"I_MPI_HYDRA_BOOTSTRAP_EXEC", "$(TRAINLET_EXEC)"},
            {"I_MPI_PERHOST", std::to_string(slots)}};
  }
  return {{"HYDRA_HOST_FILE", kHostfile},
          {"HYDRA_LAUNCHER", "rsh"},
          {"HYDRA_LAUNCHER_EXEC", "$(TRAINLET_EXEC)"}};
}

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

std::vector<std::pair<std::string, std::string>> MpiBindingDefaults(const PlanRequest& request) {
  if (TrainerSetsMcaParam(request, "hwloc_base_binding_policy") ||
      TrainerSetsMcaParam(request, "hwloc_default_binding_policy")) {
    return {};
  }
  for (const auto& arg : request.argv) {
    std::istringstream split(arg);
    for (std::string w; split >> w;) {
      if (w == "--bind-to" || w == "-bind-to" || w.rfind("--bind-to=", 0) == 0) return {};
    }
  }
  return {{"OMPI_MCA_hwloc_base_binding_policy", "none"},
          {"PRTE_MCA_hwloc_default_binding_policy", "none"}};
}

std::vector<std::pair<std::string, std::string>> MpiTcpNetworkDefaults(const PlanRequest& request) {
  std::vector<std::pair<std::string, std::string>> out;
  const std::optional<std::string> networks = AdvertisedNetwork(request.nodes);
  if (!networks) return out;
  for (const auto& param : kTcpInterfaceParams) {
    if (TrainerSetsMcaParam(request, param.include) || TrainerSetsMcaParam(request, param.exclude))
      continue;
    out.emplace_back("OMPI_MCA_" + std::string(param.include), *networks);
  }
  return out;
}

std::optional<std::string> AdvertisedNetwork(const std::vector<PlacedNode>& nodes) {
  // One network, not one entry per node: OpenMPI warns on every host for each if_include entry
  // that matches none of its interfaces ("Did not find interface matching this subnet"), so a
  // list of per-node entries would print a warning per other node into every job's output.
  // /31 at the narrowest, not /32: OpenMPI 4.1 turns a prefix into a netmask with
  // ((1 << prefix) - 1) << (32 - prefix), which for 32 shifts by the word size and on x86 gives
  // the mask 0, so "A.B.C.D/32" matches every interface, lo first (seen with 4.1.4: mpirun
  // offered lo and every bridge to its daemons).
  constexpr int kNarrowestPrefix = 31;
  // Wider than a /8 is no narrowing worth the name (nodes in unrelated networks): leave it.
  constexpr int kWidestPrefix = 8;
  if (nodes.empty()) return std::nullopt;
  uint32_t first = 0;
  int prefix = kNarrowestPrefix;
  for (size_t i = 0; i < nodes.size(); ++i) {
    in_addr address{};
    if (inet_pton(AF_INET, nodes[i].address.c_str(), &address) != 1) return std::nullopt;
    const uint32_t host = ntohl(address.s_addr);
    // Linux answers all of 127/8 on lo, whose only address is usually 127.0.0.1, and OpenMPI
    // matches a CIDR against the interfaces' addresses: 127.0.0.2/31 would match nothing (the
    // tcp BTL then falls back to its default, which excludes lo), while 127.0.0.0/8 picks lo
    // on every simulated host of a local cluster.
    if ((host >> 24) == 127) prefix = std::min(prefix, 8);
    if (i == 0) first = host;
    if (host != first) prefix = std::min(prefix, std::countl_zero(host ^ first));
  }
  if (prefix < kWidestPrefix) return std::nullopt;
  in_addr network{};
  network.s_addr = htonl(first & ~(UINT32_MAX >> prefix));
  char text[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &network, text, sizeof text);
  return std::string(text) + "/" + std::to_string(prefix);
}

std::unique_ptr<RuntimePlugin> MakeMpiRuntime() { return std::make_unique<MpiRuntime>(); }

}  // namespace trainlet
