#include "plugins/runtime/mpi/mpi_direct_launch.h"

#include <algorithm>
#include <cctype>

#include "common/pmix/pmix_job_map.h"
#include "plugins/runtime/mpi/mpi_runtime.h"
#include "plugins/runtime/v1_replica_plans.h"
#include "plugins/runtime/worker_env.h"

namespace trainlet {
namespace {

constexpr const char* kJobMapFile = "pmix-job-map";
// A well-formed ORTE contact URI (jobid.vpid;tcp://address:port) that names nothing: see
// DirectPlans.
constexpr const char* kNoDaemonUri = "1.0;tcp://127.0.0.1:1";

bool SameText(std::string_view a, std::string_view b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                    [](char x, char y) { return std::tolower(x) == std::tolower(y); });
}

std::string HostnameOf(const PlacedNode& node) {
  std::string h = node.hostname.empty() ? node.name : node.hostname;
  for (char& c : h) {
    if (static_cast<unsigned char>(c) <= ' ' || c == ',') c = '_';
  }
  return h.empty() ? "node" : h;
}

// The file name of `word`: what follows its last '/'.
std::string_view BaseName(std::string_view word) {
  const size_t slash = word.rfind('/');
  return slash == std::string_view::npos ? word : word.substr(slash + 1);
}

bool IsLauncherWord(std::string_view word) {
  static constexpr std::string_view kLaunchers[] = {
      "mpirun", "mpiexec", "orterun", "prterun", "horovodrun", "deepspeed", "mlx.launch"};
  const std::string_view name = BaseName(word);
  return std::any_of(std::begin(kLaunchers), std::end(kLaunchers),
                     [&](std::string_view l) { return name.substr(0, l.size()) == l; });
}

bool IsShell(std::string_view word) {
  static constexpr std::string_view kShells[] = {"sh", "bash", "dash", "zsh", "ksh", "ash"};
  const std::string_view name = BaseName(word);
  if (name.size() > 3 && name.substr(name.size() - 3) == ".sh") return true;
  return std::find(std::begin(kShells), std::end(kShells), name) != std::end(kShells);
}

// Whether the direct-or-mpirun choice is automatic, and what it is.
Result<bool> ChooseByCommand(const PlanRequest& request) {
  TRAINLET_ASSIGN_OR_RETURN(const MpiImplementation impl, ChooseMpiImplementation(request));
  if (impl != MpiImplementation::kOpenMpi) return false;
  TRAINLET_ASSIGN_OR_RETURN(const auto contract, ContractOf(request, trainjob::V1Kind::kMPIJob));
  if (contract.has_value()) return false;
  return !request.argv.empty() && !CommandNeedsLauncher(request.argv);
}

}  // namespace

bool CommandNeedsLauncher(const std::vector<std::string>& argv) {
  if (argv.empty()) return false;
  if (IsShell(argv[0])) return true;
  for (const std::string& arg : argv) {
    size_t start = 0;
    for (size_t i = 0; i <= arg.size(); ++i) {
      const bool cut = i == arg.size() || std::isspace(static_cast<unsigned char>(arg[i])) ||
                       std::string_view(";&|()`'\"=<>").find(arg[i]) != std::string_view::npos;
      if (!cut) continue;
      if (i > start && IsLauncherWord(std::string_view(arg).substr(start, i - start))) return true;
      start = i + 1;
    }
  }
  return false;
}

Result<bool> WantsDirectLaunch(const PlanRequest& request) {
  const std::string key(kMpiLaunchAnnotation);
  auto it = request.annotations.find(key);
  std::string field = "metadata.annotations[" + key + "]";
  if (it == request.annotations.end() || it->second.empty()) {
    it = request.labels.find(key);
    field = "runtime metadata.labels[" + key + "]";
    if (it == request.labels.end() || it->second.empty()) return ChooseByCommand(request);
  }
  if (SameText(it->second, "mpirun")) return false;
  if (!SameText(it->second, "direct"))
    return InvalidError(field + ": must be direct or mpirun, got \"" + it->second + "\"");
  TRAINLET_ASSIGN_OR_RETURN(const MpiImplementation impl, ChooseMpiImplementation(request));
  if (impl != MpiImplementation::kOpenMpi) {
    return InvalidError(field + ": direct launch serves PMIx to OpenMPI; " +
                        std::string(MpiImplementationName(impl)) + " starts through hydra");
  }
  return true;
}

std::string DirectJobMap(const PlanRequest& request, uint32_t slots) {
  pmix::PmixJobMap map;
  map.nspace = pmix::NamespaceFor(request.job, request.attempt);
  uint32_t rank = 0;
  for (const PlacedNode& node : request.nodes) {
    pmix::PmixJobMap::Node n;
    n.hostname = HostnameOf(node);
    for (uint32_t i = 0; i < slots; ++i) n.ranks.push_back(rank++);
    map.nodes.push_back(std::move(n));
  }
  return pmix::EncodeJobMap(map);
}

std::vector<v1::LaunchPlan> DirectPlans(const PlanRequest& request, uint32_t slots) {
  std::vector<v1::LaunchPlan> plans = EmptyPlans(request);
  const std::string job_map = DirectJobMap(request, slots);
  const auto nodes = static_cast<uint32_t>(plans.size());
  for (uint32_t n = 0; n < nodes; ++n) {
    v1::LaunchPlan& plan = plans[n];
    auto* file = plan.add_files();
    file->set_path(kJobMapFile);
    file->set_content(job_map);
    for (uint32_t local = 0; local < slots; ++local) {
      v1::WorkerSpec* worker = plan.add_workers();
      for (const auto& a : request.argv) worker->add_argv(a);
      AddCommonWorkerEnv(request, {n * slots + local, local, n, nodes * slots, slots}, *worker);
      auto& env = *worker->mutable_env();
      env[pmix::kJobMapEnv] = std::string("$(TRAINLET_WORK_DIR)/") + kJobMapFile;
      // OpenMPI 4.1 takes a rank for a PMIx client only when some launcher claims it (its
      // "schizo" components know mpirun, Slurm, Flux and LSF's jsm); any other rank is a
      // singleton that forks its own orted and never reads PMIX_*. A daemon URI in the env is
      // how mpirun's ranks are told apart, and with it the rank selects the PMIx client (ess
      // pmi). No daemon is there, and none is contacted: the rank talks only to trainlet-pmix.
      env.try_emplace("OMPI_MCA_orte_local_daemon_uri", kNoDaemonUri);
      // The trainer's own setting wins, as for the launcher; only the BTL's interface matters
      // here: without mpirun there is no out-of-band channel between daemons.
      for (const auto& [name, value] : MpiTuningDefaults(request)) env.try_emplace(name, value);
      for (const auto& [name, value] : MpiTcpNetworkDefaults(request)) {
        if (name == "OMPI_MCA_btl_tcp_if_include") env.try_emplace(name, value);
      }
    }
  }
  return plans;
}

}  // namespace trainlet
