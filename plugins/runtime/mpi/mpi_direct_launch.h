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

// True when `request` asks for direct launch. Invalid (naming the annotation or label) for any
// other value, and for direct launch with an MPI other than OpenMPI (MPICH and Intel start
// through hydra).
Result<bool> WantsDirectLaunch(const PlanRequest& request);

// The job map every node's plan carries (common/pmix/pmix_job_map.h): `slots` ranks per node in
// node-rank order, each node named by its hostname (else its node name).
std::string DirectJobMap(const PlanRequest& request, uint32_t slots);

// One plan per node, each with its `slots` ranks of the trainer command, the job map file and
// OpenMPI's settings (MpiTuningDefaults; btl_tcp_if_include from MpiTcpNetworkDefaults).
std::vector<v1::LaunchPlan> DirectPlans(const PlanRequest& request, uint32_t slots);

}  // namespace trainlet
