// `mpi`: Kubeflow's mlPolicy.mpi without SSH.
//
// The trainer command (normally `mpirun ...`) runs once, on node rank 0: the launcher. The job's
// hostfile lists every placed node by its advertised address with numProcPerNode slots, and
// OpenMPI's rsh launch agent is trainlet-exec, so `mpirun` starts its `orted` daemons on the other
// nodes through their trainlet agents rather than through sshd. The other nodes run nothing
// until mpirun asks. The launcher authenticates with a key pair made for the attempt.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "trainlet/runtime_plugin.h"

namespace trainlet {

std::unique_ptr<RuntimePlugin> MakeMpiRuntime();

// MPI start-up settings the launcher gets unless the trainer env sets them (the trainer's value
// wins): what a well-run cluster sets for its interconnect, chosen from what the placed nodes
// report. Today one: OMPI_MCA_pml=ob1 when no node reports an RDMA device (docs/runtimes.md,
// "mpi").
std::vector<std::pair<std::string, std::string>> MpiTuningDefaults(const PlanRequest& request);

// The hostfile (`<address> slots=N`, one line per node) for a placement.
std::string MpiHostfile(const std::vector<PlacedNode>& nodes, uint32_t slots);

}  // namespace trainlet
