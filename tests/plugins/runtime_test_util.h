// PlanRequests for the runtime plugin tests: N nodes at 10.0.0.(i+1), each with reserved ports;
// and the two planning steps called as the coordinator calls them.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "plugins/plugin_status.h"
#include "trainlet/runtime_plugin.h"

namespace trainlet::testing_util {

// `ports_per_node` ports on each node, 30000 + 100 * node + index, so a test can tell them apart.
inline PlanRequest MakeRequest(uint32_t nodes, const std::string& per_node,
                               std::vector<std::string> argv, uint32_t ports_per_node = 1) {
  PlanRequest req;
  req.job = "job";
  req.attempt = 2;
  req.argv = std::move(argv);
  req.num_proc_per_node = per_node;
  for (uint32_t i = 0; i < nodes; ++i) {
    PlacedNode n;
    n.name = "node-" + std::to_string(i + 1);
    n.address = "10.0.0." + std::to_string(i + 1);
    n.hostname = "host" + std::to_string(i + 1);
    for (uint32_t p = 0; p < ports_per_node; ++p) n.ports.push_back(30000 + 100 * i + p);
    req.nodes.push_back(n);
  }
  return req;
}

// `request` as Layout sees it: placed, no port reserved yet.
inline PlanRequest WithoutPorts(PlanRequest request) {
  for (auto& n : request.nodes) n.ports.clear();
  return request;
}

// Layout (without ports) then Render (with `request`'s ports), as the coordinator plans an
// attempt: the plans, or the error of the step that refused, in trainlet's Result so tests can
// compare ErrorCode.
inline Result<std::vector<v1::LaunchPlan>> LayoutAndRender(const RuntimePlugin& plugin,
                                                           const PlanRequest& request) {
  TRAINLET_ASSIGN_OR_RETURN(const AttemptLayout layout,
                            ToResult(plugin.Layout(WithoutPorts(request))));
  return ToResult(plugin.Render(request, layout));
}

// The ports the layout asks node `node_rank` to reserve. A refused layout fails the test.
inline uint32_t PortsPerNode(const RuntimePlugin& plugin, const PlanRequest& request,
                             uint32_t node_rank) {
  auto layout = plugin.Layout(WithoutPorts(request));
  EXPECT_TRUE(layout.ok()) << layout.status().ToString();
  if (!layout.ok() || node_rank >= layout->nodes.size()) return 0;
  return layout->nodes[node_rank].ports;
}

// The rank the layout names its exec launcher, if any.
inline std::optional<uint32_t> ExecLauncher(const RuntimePlugin& plugin,
                                            const PlanRequest& request) {
  auto layout = plugin.Layout(WithoutPorts(request));
  EXPECT_TRUE(layout.ok()) << layout.status().ToString();
  return layout.ok() ? layout->exec_launcher_rank : std::nullopt;
}

inline std::map<std::string, std::string> Env(const v1::WorkerSpec& w) {
  return {w.env().begin(), w.env().end()};
}

inline std::vector<std::string> Argv(const v1::WorkerSpec& w) {
  return {w.argv().begin(), w.argv().end()};
}

// A topology with `gpus` GPUs and `pus` hardware threads.
inline v1::Topology Topo(int gpus, uint32_t pus) {
  v1::Topology t;
  t.set_pus(pus);
  t.set_cores(pus / 2);
  for (int g = 0; g < gpus; ++g) t.add_gpus()->set_device_class(v1::PciDevice::CLASS_GPU);
  return t;
}

}  // namespace trainlet::testing_util
