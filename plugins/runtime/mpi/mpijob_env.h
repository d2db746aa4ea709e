// What mpi-operator's v2beta1 MPIJob launcher gets beyond the mpi plugin's own env
// (pkg/controller/mpi_job_controller.go), for jobs converted from a kubeflow.org/v2beta1 MPIJob:
// K_MPI_JOB_ROLE=launcher, and per mpiImplementation the hostfile variable the launcher reads,
// pointed at the plugin's hostfile in the job's work dir (where mpi-operator mounts
// /etc/mpi/hostfile):
//   OpenMPI: OMPI_MCA_orte_default_hostfile (set by the plugin for every job), "<host> slots=N"
//   Intel:   I_MPI_HYDRA_HOST_FILE and I_MPI_PERHOST=slotsPerWorker, "<host>:N"
//   MPICH:   HYDRA_HOST_FILE, "<host>:N"
// plus, for Intel and MPICH, trainlet-exec as Hydra's ssh (I_MPI_HYDRA_BOOTSTRAP_EXEC,
// HYDRA_LAUNCHER_EXEC), as OpenMPI's rsh agent is for every mpi job. mpi-operator's
// "-o ConnectionAttempts=10" ssh arguments are not given: trainlet-exec is no ssh.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/trainjob/v1_job.h"
#include "plugins/runtime/v1_replica_plans.h"

namespace trainlet {

// The launcher's extra env for `contract`'s mpiImplementation; `hostfile` is the path the plugin
// wrote.
EnvList MPIJobLauncherEnv(const trainjob::V1JobContract& contract, const std::string& hostfile);

// The hostfile in `implementation`'s format: "<address> slots=N" (OpenMPI), "<address>:N" (Intel,
// MPICH); one line per node.
std::string MPIJobHostfile(const std::vector<PlacedNode>& nodes, uint32_t slots,
                           const std::string& implementation);

}  // namespace trainlet
