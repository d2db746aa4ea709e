// The runtime plugin interface: how a framework (plain, torch, mpi, jax, mlx, xgboost) turns a
// gang placement into one launch plan per node.
//
// Plugins are plain classes built by a factory and listed in one ordered table
// (plugins/runtime/registry.cpp). They are stateless and called only from the coordinator's loop.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "trainlet/v1/launch.pb.h"
#include "trainlet/v1/node.pb.h"

namespace trainlet {

// One node of the placement, in node-rank order.
struct PlacedNode {
  std::string name;
  std::string address;  // where ranks on other nodes reach this node
  std::string hostname;
  v1::Topology topology;
  // Ports the node's agent reserved for this attempt (RuntimePlugin::PortsPerNode of them), in
  // the order the plugin asked; empty when the plugin asked for none.
  std::vector<uint32_t> ports;
  // RDMA devices the node reported (InfiniBand verbs names such as "mlx5_0"), for MLX's jaccl.
  std::vector<std::string> rdma_devices;
};

// Everything a plugin needs to plan one attempt. The trainer fields are already resolved from the
// TrainJob and its runtime (TrainJob wins).
struct PlanRequest {
  std::string job;
  uint32_t attempt = 1;
  std::vector<std::string> argv;              // trainer command + args
  std::vector<std::pair<std::string, std::string>> env;  // trainer env, in order
  std::string num_proc_per_node;              // as written: "4", "auto", or "" when unset
  // The runtime's labels and annotations, then the TrainJob's annotations on top. Plugins read
  // their switches here (e.g. trainer.kubeflow.org/framework: mlx).
  std::map<std::string, std::string> labels;
  std::map<std::string, std::string> annotations;
  std::vector<PlacedNode> nodes;
  uint32_t stop_grace_ms = 10000;
  // For plugins that UsesExec(): where and as whom the launcher reaches the coordinator's exec
  // endpoint (trainlet-exec reads these from TRAINLET_EXEC_* env).
  std::string exec_endpoint;
  std::string exec_server_key;       // the coordinator's public key
  std::string launcher_public_key;   // this attempt's launcher key pair
  std::string launcher_secret_key;
};

class RuntimePlugin {
 public:
  virtual ~RuntimePlugin() = default;
  // The name runtimes select it by ("plain", "torch", ...). Constant.
  virtual std::string_view name() const = 0;
  // Processes this plugin starts on a node with `topology` for `num_proc_per_node`, so the
  // planner can reserve slots before placing. Errors name the field.
  virtual Result<uint32_t> ProcsPerNode(std::string_view num_proc_per_node,
                                        const v1::Topology* topology) const = 0;
  // Ports the agent of the node at `node_rank` must reserve before Plan() is called with them in
  // PlacedNode::ports (the coordinator calls Plan once without ports to check the request and
  // lay out the ranks, then reserves, then plans again). 0, the default, skips the reservation.
  virtual uint32_t PortsPerNode(const PlanRequest& /*request*/, uint32_t /*node_rank*/) const {
    return 0;
  }
  // One plan per node, in node-rank order. Every worker carries the TRAINLET_* env.
  virtual Result<std::vector<v1::LaunchPlan>> Plan(const PlanRequest& request) const = 0;
  // True when the plugin's launcher starts processes on other nodes through trainlet-exec; the
  // coordinator then makes a launcher key pair for each attempt.
  virtual bool UsesExec() const { return false; }
  // One line for `describe`: how the job is started ("ranks started directly by the agents").
  virtual std::string LaunchMode(const PlanRequest& request) const = 0;
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
