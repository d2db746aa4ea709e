// `mlx`: MLX's own distributed backends, without MPI or SSH.
//
// Selected by a runtime labelled trainer.kubeflow.org/framework: mlx that has no mlPolicy.mpi
// (SelectRuntimePlugin); Kubeflow's mlx-distributed runtime has mpi and stays on the mpi plugin.
//
// Backends, as mlx.launch sets them up (the TrainJob annotation trainlet.io/mlx-backend: ring |
// jaccl | jaccl-ring | nccl | auto, default auto; auto is nccl when every node has CUDA (NVIDIA)
// GPUs, else jaccl when the job has several nodes, one process per node and RDMA devices on every
// node, else ring):
// - ring: each rank listens on its node's address at ports that node's agent reserved, one per
//   connection (trainlet.io/mlx-ring-connections, 1 to 16, default 1), and MLX connects each rank
//   to the next. MLX_HOSTFILE names a JSON file in the work dir: a list with one entry per rank, in
//   rank order, each a list of "ip:port" strings (one per connection). MLX_RANK is the rank.
// - jaccl: one process per node; MLX_IBV_DEVICES names a JSON file holding an N x N matrix of
//   ibverbs device names (row i, column j: the device(s) node i uses to reach node j; null on the
//   diagonal), and MLX_JACCL_COORDINATOR is node rank 0's address and a port reserved there.
//   Devices are dealt to a node's peers (peers in node-rank order, itself left out) in turn:
//   device k faces peer k mod P. A node with fewer devices than peers reuses them (one switched
//   NIC reaches all); one with more lists several per peer (a JSON list instead of a name).
// - jaccl-ring: jaccl over a ring (MLX_JACCL_RING=1): the matrix names devices only between ring
//   neighbours (node i and i +- 1 mod N), the same number per link on every node (several when
//   every node has them: more than one cable per neighbour), and null elsewhere.
// - nccl (Linux CUDA nodes): NCCL_HOST_IP and NCCL_PORT are node rank 0's address and a port
//   reserved there (NCCL's bootstrap), MLX_WORLD_SIZE the number of ranks, MLX_RANK the rank, and
//   each rank sees one GPU: CUDA_VISIBLE_DEVICES (NcclRankGpu) with CUDA_DEVICE_ORDER=PCI_BUS_ID.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "trainlet/runtime_plugin.h"

namespace trainlet {

std::unique_ptr<RuntimePlugin> MakeMlxRuntime();

inline constexpr std::string_view kMlxBackendAnnotation = "trainlet.io/mlx-backend";
inline constexpr std::string_view kMlxRingConnectionsAnnotation =
    "trainlet.io/mlx-ring-connections";
inline constexpr std::string_view kMlxHostfileName = "mlx-hostfile.json";
inline constexpr std::string_view kMlxIbvDevicesName = "mlx-ibv-devices.json";

enum class MlxBackend { kRing, kJaccl, kJacclRing, kNccl };

// The backend for `request` (see above). Invalid errors name the annotation, the field or the
// node: an unknown backend, jaccl(-ring) with several processes per node or a node without RDMA
// devices, nccl on a node without CUDA GPUs.
Result<MlxBackend> ChooseMlxBackend(const PlanRequest& request);

// Connections per rank for the ring (the annotation; 1 when unset). Invalid names the annotation.
Result<uint32_t> MlxRingConnections(const PlanRequest& request);

// MLX's ring hostfile: one JSON list per rank of its "ip:port" strings.
std::string MlxRingHostfileJson(const std::vector<std::vector<std::string>>& rank_addresses);

// MLX_IBV_DEVICES's matrix for the placed nodes (see above): [i][j] lists the devices node i uses
// to reach node j, empty where there is none (the diagonal; non-neighbours when `ring`).
std::vector<std::vector<std::vector<std::string>>> MlxIbvDeviceMatrix(
    const std::vector<PlacedNode>& nodes, bool ring);

// The same matrix as MLX reads it: JSON, each entry null, a device name, or a list of names.
std::string MlxIbvDevicesJson(const std::vector<PlacedNode>& nodes, bool ring = false);

// CUDA GPUs of a node: its topology's GPUs from NVIDIA (vendor "nvidia" or PCI vendor 0x10de).
uint32_t CudaGpus(const PlacedNode& node);

// The GPU (index among the node's CUDA GPUs, PCI bus order) that local rank `local_rank` of
// `local_ranks` uses with nccl: the first of the block the agent binds it to (GPUs split evenly in
// rank order, shared in blocks when ranks outnumber them), so its CPUs stay near its GPU. With as
// many ranks as GPUs, local rank r gets GPU r, as mlx.launch gives it. 0 when `gpus` is 0.
uint32_t NcclRankGpu(uint32_t local_rank, uint32_t local_ranks, uint32_t gpus);

}  // namespace trainlet
