#include "plugins/runtime/mpi/mpijob_env.h"

namespace trainlet {

EnvList MPIJobLauncherEnv(const trainjob::V1JobContract& c, const std::string& hostfile) {
  EnvList env = {{"K_MPI_JOB_ROLE", "launcher"}};
  const std::string slots = std::to_string(c.slots_per_worker);
  if (c.mpi_implementation == "Intel") {
    env.emplace_back("I_MPI_HYDRA_HOST_FILE", hostfile);
    env.emplace_back("I_MPI_PERHOST", slots);
    env.emplace_back("I_MPI_HYDRA_BOOTSTRAP", "ssh");
    env.emplace_back("I_MPI_HYDRA_BOOTSTRAP_EXEC", "$(TRAINLET_EXEC)");
  } else if (c.mpi_implementation == "MPICH") {
    env.emplace_back("HYDRA_HOST_FILE", hostfile);
    env.emplace_back("HYDRA_LAUNCHER", "ssh");
    env.emplace_back("HYDRA_LAUNCHER_EXEC", "$(TRAINLET_EXEC)");
  } else {
    env.emplace_back("OMPI_MCA_orte_keep_fqdn_hostnames", "true");
    env.emplace_back("OMPI_MCA_orte_default_hostfile", hostfile);
    env.emplace_back("OMPI_MCA_orte_set_default_slots", slots);
  }
  return env;
}

std::string MPIJobHostfile(const std::vector<PlacedNode>& nodes, uint32_t slots,
                           const std::string& implementation) {
  const bool hydra = implementation == "Intel" || implementation == "MPICH";
  std::string out;
  for (const auto& n : nodes) {
    out += n.address + (hydra ? ":" : " slots=") + std::to_string(slots) + "\n";
  }
  return out;
}

}  // namespace trainlet
