// `mpi`: Kubeflow's mlPolicy.mpi without SSH.
//
// The trainer command (normally `mpirun ...`) runs once, on node rank 0: the launcher. The job's
// hostfile lists every placed node by its advertised address with numProcPerNode slots, and
// OpenMPI's rsh launch agent is trainlet-exec, so `mpirun` starts its `orted` daemons on the other
// nodes through their trainlet agents rather than through sshd. The other nodes run nothing
// until mpirun asks. The launcher authenticates with a key pair made for the attempt.
#pragma once

#include <memory>
#include <optional>
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

// OpenMPI's TCP kept on the agents' network: OMPI_MCA_btl_tcp_if_include (ranks to ranks) and
// OMPI_MCA_oob_tcp_if_include (mpirun to its daemons), each AdvertisedNetworks(request.nodes).
// Without them OpenMPI binds and advertises every interface of a node, and a job fails when an
// unrelated one comes and goes ("bind on local address (10.89.77.1:0) failed"). A parameter is
// left out when the trainer sets it or its exclude counterpart, in the trainer env or anywhere in
// the command (`mpirun --mca btl_tcp_if_exclude ...`): OpenMPI refuses an include and an exclude
// together. Nothing when AdvertisedNetworks has no value. The launcher gets these; mpirun hands
// them to its remote daemons (as `-mca` arguments) and to every rank (docs/runtimes.md, "mpi").
std::vector<std::pair<std::string, std::string>> MpiTcpNetworkDefaults(const PlanRequest& request);

// The OpenMPI if_include value that covers every node's advertised address, in node order
// without repeats: "A.B.C.D/32" for each address (the agent binds its ports there, so the address
// is on one of the node's interfaces, and OpenMPI picks the interface that holds it), and
// "127.0.0.0/8" for a loopback one. nullopt when an address is not numeric IPv4 (OpenMPI 4.1
// matches only IPv4 CIDRs, and a node left out of the list would be cut off) or there are no nodes.
std::optional<std::string> AdvertisedNetworks(const std::vector<PlacedNode>& nodes);

// The hostfile (`<address> slots=N`, one line per node) for a placement.
std::string MpiHostfile(const std::vector<PlacedNode>& nodes, uint32_t slots);

}  // namespace trainlet
