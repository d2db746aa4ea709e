// `mlx`: MLX's own distributed backends, without MPI or SSH.
//
// Selected by a runtime labelled trainer.kubeflow.org/framework: mlx that has no mlPolicy.mpi
// (SelectRuntimePlugin); Kubeflow's mlx-distributed runtime has mpi and stays on the mpi plugin.
//
// Backends (the TrainJob annotation trainlet.io/mlx-backend: ring | jaccl | auto, default auto;
// auto is jaccl when the job has several nodes, one process per node and RDMA devices on every
// node, else ring):
// - ring: each rank listens on its node's address at ports that node's agent reserved, one per
//   connection (trainlet.io/mlx-ring-connections, 1 to 16, default 1), and MLX connects each rank
//   to the next. MLX_HOSTFILE names a JSON file in the work dir: a list with one entry per rank, in
//   rank order, each a list of "ip:port" strings (one per connection). MLX_RANK is the rank.
// - jaccl: one process per node; MLX_IBV_DEVICES names a JSON file holding an N x N matrix of
//   ibverbs device names (row i, column j: the device node i uses to reach node j; null on the
//   diagonal), and MLX_JACCL_COORDINATOR is node rank 0's address and a port reserved there.
//   The k-th RDMA device of a node faces its k-th peer (peers in node-rank order, itself left
//   out); a node with fewer devices than peers reuses them in turn (one switched NIC reaches all).
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

enum class MlxBackend { kRing, kJaccl };

// The backend for `request` (see above). Invalid errors name the annotation, the field or the
// node: an unknown backend, jaccl with several processes per node or a node without RDMA devices.
Result<MlxBackend> ChooseMlxBackend(const PlanRequest& request);

// Connections per rank for the ring (the annotation; 1 when unset). Invalid names the annotation.
Result<uint32_t> MlxRingConnections(const PlanRequest& request);

// MLX's ring hostfile: one JSON list per rank of its "ip:port" strings.
std::string MlxRingHostfileJson(const std::vector<std::vector<std::string>>& rank_addresses);

// MLX_IBV_DEVICES's matrix for the placed nodes (see above), as JSON.
std::string MlxIbvDevicesJson(const std::vector<PlacedNode>& nodes);

}  // namespace trainlet
