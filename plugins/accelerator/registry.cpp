// The built-in accelerator plugins, in one ordered table. Adding a vendor means adding its folder
// and one line here.
#include <algorithm>

#include "plugins/accelerator/amd/amd_plugin.h"
#include "plugins/accelerator/apple/apple_plugin.h"
#include "plugins/accelerator/nvidia/nvidia_plugin.h"
#include "trainlet/accelerator_plugin.h"

namespace trainlet {
namespace {

struct PluginEntry {
  const char* name;
  std::unique_ptr<AcceleratorPlugin> (*make)();
};

constexpr PluginEntry kBuiltinAccelerators[] = {
    {"nvidia", &MakeNvidiaAcceleratorPlugin},
    {"amd", &MakeAmdAcceleratorPlugin},
    {"apple", &MakeAppleAcceleratorPlugin},
};

}  // namespace

std::vector<std::unique_ptr<AcceleratorPlugin>> MakeAcceleratorPlugins() {
  std::vector<std::unique_ptr<AcceleratorPlugin>> plugins;
  for (const auto& e : kBuiltinAccelerators) plugins.push_back(e.make());
  return plugins;
}

std::vector<std::string> AcceleratorPluginNames() {
  std::vector<std::string> names;
  for (const auto& e : kBuiltinAccelerators) names.emplace_back(e.name);
  return names;
}

NodeAccelerators DiscoverNodeAccelerators(
    const std::vector<std::unique_ptr<AcceleratorPlugin>>& plugins, const v1::Topology& topology,
    const AcceleratorEnv& env) {
  NodeAccelerators out;
  out.allocatable["cpu"] = topology.pus();
  out.allocatable["memory"] = static_cast<int64_t>(topology.memory_bytes());
  for (const auto& plugin : plugins) {
    auto report = plugin->Discover(topology, env);
    if (!report.ok()) {
      out.notes.push_back(std::string(plugin->name()) + ": " + report.status().message());
      continue;
    }
    const int64_t usable = std::count_if(
        report->accelerators.begin(), report->accelerators.end(),
        [](const v1::Accelerator& a) { return !a.health().starts_with("unhealthy"); });
    if (!report->accelerators.empty()) {
      out.allocatable[std::string(plugin->resource_name())] = usable;
    }
    for (auto& a : report->accelerators) out.accelerators.push_back(std::move(a));
    // The first plugin to set a label wins: table order is the precedence.
    out.labels.insert(report->labels.begin(), report->labels.end());
    for (auto& n : report->notes) out.notes.push_back(std::move(n));
  }
  return out;
}

}  // namespace trainlet
