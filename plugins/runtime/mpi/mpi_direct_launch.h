// MPI ranks started directly, with PMIx: the mpi plugin's second way to start a job
// (docs/runtimes.md, "mpi", direct launch). Every node runs its numProcPerNode ranks of the
// trainer command itself, like any trainlet job; no mpirun, orted or trainlet-exec runs. Each
// rank's env names the attempt's PMIx job map (a plan file written into the work dir), and that is
// what makes trainlet-step start the node's PMIx server (trainlet-pmix) first and give each rank
// the server's env (PMIX_NAMESPACE, PMIX_RANK, PMIX_SERVER_URI*, ...). OpenMPI's MPI_Init then
// talks to that server, whose fences ride the attempt's rendezvous fence.
//
// Pure functions of the request; any thread.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "trainlet/runtime_plugin.h"
#include "trainlet/v1/launch.pb.h"

namespace trainlet {

// "direct" (ranks started by trainlet, PMIx) or "mpirun" (the launcher through trainlet-exec, the
// default), compared without case. Read from the TrainJob's annotations, else the runtime's
// labels (the shipped mpi-direct runtime carries the label).
inline constexpr std::string_view kMpiLaunchAnnotation = "trainlet.io/mpi-launch";

// True when `request` is to be launched directly. An annotation or label of kMpiLaunchAnnotation
// decides: "direct" or "mpirun"; Invalid (naming it) for any other value, and for direct launch
// with an MPI other than OpenMPI (MPICH and Intel start through hydra). Without one, direct launch
// is the default where nothing in the command needs a launcher (CommandNeedsLauncher) and the MPI
// is OpenMPI, for a TrainJob that is not a converted MPIJob (whose launcher runs once).
Result<bool> WantsDirectLaunch(const PlanRequest& request);

// Whether the trainer command may need mpirun's daemon tree, so direct launch would be wrong:
// a word of any argument (split at spaces and shell punctuation, so `sh -c "X=1 mpirun ..."` is
// seen) whose file name starts with a launcher's (mpirun, mpiexec, orterun, prterun, horovodrun,
// deepspeed, mlx.launch: mpirun.openmpi and mpiexec.hydra too), or a command that is a shell or a
// shell script (sh, bash, dash, zsh, ksh, ash, *.sh), which may start one where trainlet cannot
// see it. False for an empty command.
bool CommandNeedsLauncher(const std::vector<std::string>& argv);

// The job map every node's plan carries (common/pmix/pmix_job_map.h): `slots` ranks per node in
// node-rank order, each node named by its hostname (else its node name).
std::string DirectJobMap(const PlanRequest& request, uint32_t slots);

// One plan per node, each with its `slots` ranks of the trainer command, the job map file and
// OpenMPI's settings (MpiTuningDefaults; btl_tcp_if_include from MpiTcpNetworkDefaults).
std::vector<v1::LaunchPlan> DirectPlans(const PlanRequest& request, uint32_t slots);

}  // namespace trainlet
