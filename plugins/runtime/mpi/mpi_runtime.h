// `mpi`: Kubeflow's mlPolicy.mpi without SSH.
//
// The trainer command (normally `mpirun ...`) runs once, on node rank 0: the launcher. The job's
// hostfile lists every placed node by its advertised address with numProcPerNode slots, and
// OpenMPI's rsh launch agent is trainlet-exec, so `mpirun` starts its `orted` daemons on the other
// nodes through their trainlet agents rather than through sshd. The other nodes run nothing
// until mpirun asks. The launcher authenticates with a key pair made for the attempt.
//
// MPICH and Intel MPI run the same way through their process manager, hydra (`mpirun.mpich`,
// Intel's `mpirun`): the hostfile is in hydra's `host:N` form and hydra's rsh launcher is
// trainlet-exec, so hydra starts its `hydra_pmi_proxy` on the other nodes through the agents. The
// annotation trainlet.io/mpi-implementation (OpenMPI, the default; MPICH; Intel) chooses: Kubeflow
// v2's CRD admits only OpenMPI in mlPolicy.mpi.mpiImplementation, and MPIJob v2beta1's
// spec.mpiImplementation maps onto the same annotation (docs/runtimes.md, "mpi").
//
// A job converted from mpi-operator's v2beta1 MPIJob runs the same way: its Launcher's command on
// node rank 0, its Workers as the placed nodes (slotsPerWorker slots each; the launcher's node is
// worker 0, or an extra node with runLauncherAsWorker), with K_MPI_JOB_ROLE=launcher as
// mpi-operator gives it; its mpiImplementation is the trainlet.io/mpi-implementation annotation.
// launcherCreationPolicy WaitForWorkersReady needs no wait: the workers run nothing until mpirun
// starts them through their agents.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"
#include "trainlet/runtime_plugin.h"

namespace trainlet {

std::unique_ptr<RuntimePlugin> MakeMpiRuntime();

// The key that names the MPI implementation the launcher runs: "OpenMPI", "MPICH" or "Intel", as
// MPIJob v2beta1 spells its spec.mpiImplementation (compared without case). Read from the
// TrainJob's annotations, else from the runtime's labels (PlanRequest::labels); unset or empty:
// OpenMPI. Whatever turns an MPIJob's spec.mpiImplementation into a plan sets this annotation.
inline constexpr std::string_view kMpiImplementationAnnotation = "trainlet.io/mpi-implementation";

enum class MpiImplementation { kOpenMpi, kMpich, kIntel };

// The implementation `request` asks for (see kMpiImplementationAnnotation). An unknown name is
// Invalid, naming the annotation or label; Layout refuses it, so the job fails before it starts.
Result<MpiImplementation> ChooseMpiImplementation(const PlanRequest& request);

// "OpenMPI", "MPICH", "Intel": the annotation's (and MPIJob's) spelling.
std::string_view MpiImplementationName(MpiImplementation impl);

// The launcher env for hydra (MPICH or Intel MPI), besides the TRAINLET_* ones: the hostfile
// ($(TRAINLET_WORK_DIR)/hostfile, HydraHostfile's), the rsh launcher and trainlet-exec as its
// executable. MPICH: HYDRA_HOST_FILE, HYDRA_LAUNCHER=rsh, HYDRA_LAUNCHER_EXEC. Intel:
// I_MPI_HYDRA_HOST_FILE, I_MPI_HYDRA_BOOTSTRAP=rsh, I_MPI_HYDRA_BOOTSTRAP_EXEC and
// I_MPI_PERHOST=`slots`, as mpi-operator sets them. `impl` must not be OpenMPI.
std::vector<std::pair<std::string, std::string>> HydraLauncherEnv(MpiImplementation impl,
                                                                  uint32_t slots);

// hydra's hostfile (`<address>:N`, one line per node) for a placement. hydra splits lines at ':',
// so a node with an IPv6 address is written by its host name (which must then resolve).
std::string HydraHostfile(const std::vector<PlacedNode>& nodes, uint32_t slots);

// MPI start-up settings the launcher gets unless the trainer env sets them (the trainer's value
// wins): what a well-run cluster sets for its interconnect, chosen from what the placed nodes
// report. Today one: OMPI_MCA_pml=ob1 when no node reports an RDMA device (docs/runtimes.md,
// "mpi").
std::vector<std::pair<std::string, std::string>> MpiTuningDefaults(const PlanRequest& request);

// OpenMPI's TCP kept on the agents' network: OMPI_MCA_btl_tcp_if_include (ranks to ranks) and
// OMPI_MCA_oob_tcp_if_include (mpirun to its daemons), each AdvertisedNetwork(request.nodes).
// Without them OpenMPI binds and advertises every interface of a node, and a job fails when an
// unrelated one comes and goes ("bind on local address (10.89.77.1:0) failed"). A parameter is
// left out when the trainer sets it or its exclude counterpart, in the trainer env or in the
// command (`mpirun --mca btl_tcp_if_exclude ...`): OpenMPI refuses an include and an exclude
// together. Nothing when AdvertisedNetwork has no value. The launcher gets these; mpirun hands
// them to its remote daemons (as `-mca` arguments) and to every rank's env (docs/runtimes.md,
// "mpi").
std::vector<std::pair<std::string, std::string>> MpiTcpNetworkDefaults(const PlanRequest& request);

// OpenMPI's binding, left to trainlet's CPU assignment: OMPI_MCA_hwloc_base_binding_policy=none
// (4.x) and PRTE_MCA_hwloc_default_binding_policy=none (5.x), unless the trainer chooses a
// binding itself (that parameter in the trainer env or `--mca`, or `--bind-to` in the command).
// The launcher and the daemons run inside the job's CPUs on their node (agent/cpu_allotment.h)
// and the ranks inherit them; OpenMPI 4.1's own default (bind to core, np <= 2) ignores the
// process's allowed CPUs and binds every node's first rank to core 0, outside the assignment and
// onto one core for concurrent jobs or simulated nodes (issue 19, defect 11).
std::vector<std::pair<std::string, std::string>> MpiBindingDefaults(const PlanRequest& request);

// The smallest IPv4 network that holds every node's advertised address, as OpenMPI's if_include
// takes it ("10.0.0.0/29" for 10.0.0.2-10.0.0.4). The agent binds its ports on its address, so
// the address is on one of the node's interfaces, and OpenMPI picks the interface whose address
// lies in the network. Never narrower than /31 (OpenMPI 4.1 gets /32 wrong, see the .cpp);
// "127.0.0.0/8" when the addresses are loopback ones. nullopt when there are no nodes, when an
// address is not numeric IPv4 (OpenMPI 4.1 matches only IPv4 networks, and a node outside the
// network would be cut off), or when the network would be wider than a /8.
std::optional<std::string> AdvertisedNetwork(const std::vector<PlacedNode>& nodes);

// OpenMPI's hostfile (`<address> slots=N`, one line per node) for a placement.
std::string MpiHostfile(const std::vector<PlacedNode>& nodes, uint32_t slots);

}  // namespace trainlet
