#include "trainletctl/describe_node.h"

#include <algorithm>
#include <map>
#include <vector>

#include "trainletctl/render.h"

namespace trainlet::cli {
namespace {

std::string Field(const std::string& name, const std::string& value) {
  std::string out = name + ":";
  out.resize(std::max<size_t>(out.size() + 1, 18), ' ');
  return out + value + "\n";
}

const v1::Accelerator* AcceleratorAt(const v1::NodeInfo& info, const std::string& bus_id) {
  for (const auto& a : info.accelerators()) {
    if (!bus_id.empty() && a.pci_bus_id() == bus_id) return &a;
  }
  return nullptr;
}

std::string DeviceLine(const v1::PciDevice& d, const v1::NodeInfo& info) {
  const bool gpu = d.device_class() == v1::PciDevice::CLASS_GPU;
  std::string line = std::string(gpu ? "GPU " : "NIC ") + d.pci_bus_id();
  if (!d.vendor().empty()) line += " " + d.vendor();
  if (const v1::Accelerator* a = gpu ? AcceleratorAt(info, d.pci_bus_id()) : nullptr) {
    line += " " + (a->model().empty() ? d.name() : a->model());
    line += " [" + a->vendor() + ":" + std::to_string(a->index());
    if (a->memory_bytes() != 0) line += ", " + HumanBytes(a->memory_bytes());
    line += ", health " + a->health() + "]";
  } else if (!d.name().empty()) {
    line += " " + d.name();
  }
  if (!d.os_devices().empty()) {
    line += " (";
    for (int i = 0; i < d.os_devices_size(); ++i) line += (i ? " " : "") + d.os_devices(i);
    line += ")";
  }
  return line;
}

std::string Tree(const v1::NodeInfo& info) {
  const v1::Topology& t = info.topology();
  std::string out = "  Machine: " + std::to_string(t.packages()) + " packages, " +
                    std::to_string(t.cores()) + " cores, " + std::to_string(t.pus()) + " PUs, " +
                    HumanBytes(t.memory_bytes());
  if (!t.cpu_model().empty()) out += ", " + t.cpu_model();
  out += "\n";
  // Devices under the NUMA node they are local to; the rest under the machine.
  std::map<int, std::vector<const v1::PciDevice*>> by_numa;
  for (const auto* list : {&t.gpus(), &t.nics()}) {
    for (const auto& d : *list) by_numa[d.numa_node()].push_back(&d);
  }
  std::vector<std::pair<std::string, std::vector<std::string>>> branches;
  for (const auto& n : t.numa_nodes()) {
    std::vector<std::string> leaves;
    for (const auto* d : by_numa[static_cast<int>(n.os_index())])
      leaves.push_back(DeviceLine(*d, info));
    by_numa.erase(static_cast<int>(n.os_index()));
    branches.push_back({"NUMA " + std::to_string(n.os_index()) + ": " +
                            HumanBytes(n.memory_bytes()) + ", CPUs " +
                            (n.cpuset().empty() ? "none" : n.cpuset()),
                        std::move(leaves)});
  }
  std::vector<std::string> elsewhere;
  for (const auto& [numa, devices] : by_numa) {
    for (const auto* d : devices) elsewhere.push_back(DeviceLine(*d, info));
  }
  if (!elsewhere.empty()) branches.push_back({"not local to one NUMA node", std::move(elsewhere)});
  for (size_t b = 0; b < branches.size(); ++b) {
    const bool last = b + 1 == branches.size();
    out += std::string("  ") + (last ? "└─ " : "├─ ") + branches[b].first + "\n";
    const auto& leaves = branches[b].second;
    for (size_t i = 0; i < leaves.size(); ++i) {
      out += std::string("  ") + (last ? "   " : "│  ") + (i + 1 == leaves.size() ? "└─ " : "├─ ") +
             leaves[i] + "\n";
    }
  }
  return out;
}

std::string Accelerators(const v1::NodeInfo& info) {
  if (info.accelerators().empty()) return "  <none>\n";
  std::vector<std::vector<std::string>> rows = {
      {"INDEX", "VENDOR", "MODEL", "BUS", "NUMA", "CPUS", "MEMORY", "UUID", "HEALTH"}};
  for (const auto& a : info.accelerators()) {
    std::string model = a.model().empty() ? "-" : a.model();
    if (a.gpu_cores() != 0) model += " (" + std::to_string(a.gpu_cores()) + " GPU cores)";
    rows.push_back({std::to_string(a.index()), a.vendor(), model,
                    a.pci_bus_id().empty() ? "-" : a.pci_bus_id(),
                    a.numa_node() < 0 ? "-" : std::to_string(a.numa_node()),
                    a.local_cpuset().empty() ? "-" : a.local_cpuset(),
                    a.memory_bytes() == 0 ? "-" : HumanBytes(a.memory_bytes()),
                    a.uuid().empty() ? "-" : a.uuid(), a.health()});
  }
  std::string table = RenderTable(rows), out;
  size_t start = 0;
  while (start < table.size()) {
    const size_t nl = table.find('\n', start);
    out += "  " + table.substr(start, nl - start) + "\n";
    if (nl == std::string::npos) break;
    start = nl + 1;
  }
  for (const auto& a : info.accelerators()) {
    if (a.performance_cores() != 0 || a.efficiency_cores() != 0) {
      out += "  " + a.model() + ": " + std::to_string(a.performance_cores()) + " performance + " +
             std::to_string(a.efficiency_cores()) + " efficiency cores, unified memory " +
             HumanBytes(a.memory_bytes()) + "\n";
    }
  }
  return out;
}

template <typename Map>
std::string SortedLines(const Map& map, bool bytes_for_memory) {
  if (map.empty()) return "  <none>\n";
  std::map<std::string, std::string> sorted;
  for (const auto& [k, v] : map) {
    if constexpr (std::is_same_v<std::decay_t<decltype(v)>, std::string>) {
      sorted[k] = v;
    } else {
      sorted[k] = bytes_for_memory && k == "memory"
                      ? HumanBytes(static_cast<uint64_t>(v)) + " (" + std::to_string(v) + ")"
                      : std::to_string(v);
    }
  }
  std::string out;
  for (const auto& [k, v] : sorted) out += "  " + k + "=" + v + "\n";
  return out;
}

}  // namespace

std::string GpuColumn(const v1::NodeInfo& info) {
  const auto unhealthy =
      std::count_if(info.accelerators().begin(), info.accelerators().end(),
                    [](const v1::Accelerator& a) { return a.health().starts_with("unhealthy"); });
  std::string out = std::to_string(info.accelerators_size());
  if (unhealthy > 0) out += " (" + std::to_string(unhealthy) + " unhealthy)";
  return out;
}

std::string DescribeNode(const v1::NodeStatus& node, int64_t now_ms) {
  const v1::NodeInfo& info = node.info();
  std::string out;
  out += Field("Name", info.name());
  out += Field("Status", node.state() + (node.schedulable() ? "" : ",SchedulingDisabled"));
  out += Field("Address", info.address());
  out += Field("Hostname", info.hostname());
  out += Field("Agent version", info.agent_version());
  out += Field("Registered", Age(node.registered_unix_ms(), now_ms) + " ago");
  out += Field("Slots",
               std::to_string(info.slots()) + " (" + std::to_string(node.used_slots()) + " used)");
  out += Field("Topology", info.topology().source());
  out += Tree(info);
  out += "Accelerators:\n" + Accelerators(info);
  out += "Allocatable:\n" + SortedLines(info.allocatable(), true);
  out += "Labels:\n" + SortedLines(info.labels(), false);
  if (!info.discovered_labels().empty()) {
    out += "Discovered labels:\n" + SortedLines(info.discovered_labels(), false);
  }
  return out;
}

}  // namespace trainlet::cli
