// PlanRequests for the runtime plugin tests: N nodes at 10.0.0.(i+1), each with reserved ports.
#pragma once

#include <map>
#include <string>
#include <vector>

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
