// The runtime plugin interface: how a framework (plain, torch, mpi, jax, mlx, xgboost) turns a
// gang placement into one launch plan per node.
//
// Plugins are plain classes built by a factory and listed in one ordered table
// (plugins/runtime/registry.cpp). They are stateless and called only from the coordinator's loop.
//
// One attempt is planned in two steps, each called once:
//   1. Layout(request): before any port is reserved. Checks the request, lays out the ranks on
//      the placed nodes, and says how many ports each node's agent must reserve and which rank
//      (if any) starts others through trainlet-exec. The coordinator stores the ranks from it.
//   2. Render(request, layout): the same request with the reserved ports filled in
//      (PlacedNode::ports); makes the launch plans, whose workers are exactly the layout's ranks.
// Secrets never pass through a plugin: the coordinator gives the exec launcher its key after
// Render (TRAINLET_EXEC_* env, which trainlet-exec reads).
//
// This header and trainlet/plugin_result.h are the whole contract: they include nothing of
// trainlet's internals, only the generated trainlet/v1/ messages.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "trainlet/plugin_result.h"
#include "trainlet/v1/launch.pb.h"
#include "trainlet/v1/node.pb.h"

namespace trainlet {

// One node of the placement, in node-rank order.
struct PlacedNode {
  std::string name;
  std::string address;  // where ranks on other nodes reach this node
  std::string hostname;
  v1::Topology topology;
  // Ports the node's agent reserved for this attempt (NodeLayout::ports of them), in the order
  // the plugin asked. Always empty in Layout's request; filled in Render's.
  std::vector<uint32_t> ports;
  // RDMA devices the node reported (InfiniBand verbs names such as "mlx5_0"), for MLX's jaccl.
  std::vector<std::string> rdma_devices;
};

// Everything a plugin needs to plan one attempt. The trainer fields are already resolved from the
// TrainJob and its runtime (TrainJob wins).
struct PlanRequest {
  std::string job;
  uint32_t attempt = 1;
  std::vector<std::string> argv;                         // trainer command + args
  std::vector<std::pair<std::string, std::string>> env;  // trainer env, in order
  std::string num_proc_per_node;  // as written: "4", "auto", or "" when unset
  // The runtime's labels and annotations, then the TrainJob's annotations on top. Plugins read
  // their switches here (e.g. trainer.kubeflow.org/framework: mlx).
  std::map<std::string, std::string> labels;
  std::map<std::string, std::string> annotations;
  std::vector<PlacedNode> nodes;
  uint32_t stop_grace_ms = 10000;
  // The runtime container's workingDir ("" when unset), relative to the job's work dir on each
  // node or absolute. The coordinator gives it to every worker whose cwd the plugin leaves empty
  // (coordinator/working_dir.h), so a plugin needs it only to pass it on some other way.
  std::string working_dir;
  // The runtime container's securityContext.runAsUser / runAsGroup (unset when not given). The
  // coordinator sets them on every worker of the main replicated job (WorkerSpec.run_as_user), so
  // a plugin needs them only to pass them on some other way.
  std::optional<int64_t> run_as_user, run_as_group;
  // The runtime container's securityContext.allowPrivilegeEscalation, set by the coordinator on
  // the same workers (WorkerSpec.allow_privilege_escalation).
  std::optional<bool> allow_privilege_escalation;
  // The runtime pod's securityContext.fsGroup, set by the coordinator on the same workers
  // (WorkerSpec.fs_group).
  std::optional<int64_t> fs_group;
  // Set in Render's request when the layout names an exec launcher, empty otherwise: where the
  // launcher reaches the coordinator's exec endpoint and as whom. Public values; the coordinator
  // itself puts them, and the launcher's secret key, in the launcher's TRAINLET_EXEC_* env, so a
  // plugin needs them only to hand them over some other way.
  std::string exec_endpoint;
  std::string exec_server_key;      // the coordinator's public key (Z85)
  std::string launcher_public_key;  // this attempt's launcher public key (Z85)
};

// One rank as the layout places it.
struct LaidOutRank {
  uint32_t rank = 0;        // global rank, 0 .. world size - 1
  uint32_t local_rank = 0;  // its index among its node's ranks
};

// What one placed node runs.
struct NodeLayout {
  // The workers Render puts in this node's plan, in that order. Empty for a node that runs
  // nothing until a launcher asks (mpi's non-launcher nodes).
  std::vector<LaidOutRank> ranks;
  // Ports the node's agent reserves before Render (0: none).
  uint32_t ports = 0;
};

// Layout's answer: how an attempt sits on its placed nodes, decided before any port exists.
struct AttemptLayout {
  std::vector<NodeLayout> nodes;  // one per PlanRequest::nodes, in node-rank order
  // The rank whose process starts processes on other nodes through trainlet-exec (mpirun); the
  // coordinator makes a key pair for the attempt and gives this rank its TRAINLET_EXEC_* env.
  // Unset: the runtime does not use exec.
  std::optional<uint32_t> exec_launcher_rank;
};

class RuntimePlugin {
 public:
  virtual ~RuntimePlugin() = default;
  // The name runtimes select it by ("plain", "torch", ...). Constant.
  virtual std::string_view name() const = 0;
  // Processes this plugin starts on a node with `topology` for `num_proc_per_node`, so the
  // planner can reserve slots before placing. Errors name the field.
  virtual PluginResult<uint32_t> ProcsPerNode(std::string_view num_proc_per_node,
                                              const v1::Topology* topology) const = 0;
  // Step 1, without ports (PlacedNode::ports is empty). An error means the request cannot run on
  // this runtime (Invalid, naming the field): the coordinator fails the job and never retries it.
  virtual PluginResult<AttemptLayout> Layout(const PlanRequest& request) const = 0;
  // Step 2: `request` is Layout's with each node's reserved ports (layout.nodes[i].ports of them)
  // and, when the layout names an exec launcher, the exec_* fields. One plan per node, in
  // node-rank order; every worker carries the TRAINLET_* env. An error (a port missing: Invalid,
  // naming the variable and the node) fails the attempt; for a layout that wants no ports, Render
  // runs before the attempt is stored, so there it fails the job, as a Layout error does.
  virtual PluginResult<std::vector<v1::LaunchPlan>> Render(const PlanRequest& request,
                                                           const AttemptLayout& layout) const = 0;
  // One line for `describe`: how the job is started ("ranks started directly by the agents").
  virtual std::string LaunchMode(const PlanRequest& request) const = 0;
  // Env names this runtime sets itself, which a job may not set (DMLC_NUM_WORKER for xgboost).
  // The coordinator refuses a TrainJob that sets one when it is applied, naming the variable, so
  // the job is never created only to fail at its first placement. Constant; none by default.
  virtual std::vector<std::string_view> ReservedEnv() const { return {}; }
};

// Finds the built-in plugin for a framework name; nullptr when trainlet has none (yet).
const RuntimePlugin* FindRuntimePlugin(std::string_view framework);
// The plugin that runs jobs of a runtime: `framework` is the runtime's mlPolicy key ("plain"
// when it has none), `labels` its metadata labels. Usually FindRuntimePlugin(framework); a label
// can pick another (see registry.cpp for the rules). nullptr when trainlet has none.
const RuntimePlugin* SelectRuntimePlugin(std::string_view framework,
                                         const std::map<std::string, std::string>& labels);
// Names of the built-in plugins, in table order.
std::vector<std::string> RuntimePluginNames();

}  // namespace trainlet
