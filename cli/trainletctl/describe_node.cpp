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

// One line of the hardware tree and what hangs under it.
struct Branch {
  std::string text;
  std::vector<Branch> children;
};

void RenderBranches(const std::vector<Branch>& branches, const std::string& prefix,
                    std::string& out) {
  for (size_t i = 0; i < branches.size(); ++i) {
    const bool last = i + 1 == branches.size();
    out += prefix + (last ? "└─ " : "├─ ") + branches[i].text + "\n";
    RenderBranches(branches[i].children, prefix + (last ? "   " : "│  "), out);
  }
}

std::string PackageLine(const v1::CpuPackage& p) {
  std::string line = "Package " + std::to_string(p.os_index()) + ":";
  if (!p.cpu_model().empty()) line += " " + p.cpu_model() + ",";
  line += " " + std::to_string(p.cores()) + " cores, " + std::to_string(p.pus()) + " PUs";
  if (!p.cpuset().empty()) line += " (CPUs " + p.cpuset() + ")";
  if (p.memory_bytes() != 0) line += ", " + HumanBytes(p.memory_bytes());
  return line;
}

std::string NumaLine(const v1::NumaNode& n) {
  return "NUMA " + std::to_string(n.os_index()) + ": " + HumanBytes(n.memory_bytes()) + ", CPUs " +
         (n.cpuset().empty() ? "none" : n.cpuset());
}

}  // namespace

std::string TopologyTree(const v1::NodeInfo& info) {
  const v1::Topology& t = info.topology();
  std::string out = "  Machine: " + std::to_string(t.packages()) +
                    (t.packages() == 1 ? " package, " : " packages, ") + std::to_string(t.cores()) +
                    " cores, " + std::to_string(t.pus()) + " PUs, " + HumanBytes(t.memory_bytes());
  if (!t.cpu_model().empty()) out += ", " + t.cpu_model();
  out += "\n";
  // Without cpu_packages (an agent that predates them) the package fields read 0 and mean
  // nothing, so the tree starts at the NUMA nodes.
  const bool packaged = !t.cpu_packages().empty();
  auto package_of_numa = [&](const v1::NumaNode& n) { return packaged ? n.package() : -1; };

  // Devices under the NUMA node they are local to; else under their package; else the machine.
  std::map<int, std::vector<Branch>> by_numa, by_package;
  std::vector<Branch> elsewhere;
  for (const auto* list : {&t.gpus(), &t.nics()}) {
    for (const auto& d : *list) {
      Branch leaf{DeviceLine(d, info), {}};
      const bool numa_known = std::any_of(
          t.numa_nodes().begin(), t.numa_nodes().end(),
          [&](const v1::NumaNode& n) { return static_cast<int>(n.os_index()) == d.numa_node(); });
      if (d.numa_node() >= 0 && numa_known) {
        by_numa[d.numa_node()].push_back(std::move(leaf));
      } else if (packaged && d.package() >= 0) {
        by_package[d.package()].push_back(std::move(leaf));
      } else {
        elsewhere.push_back(std::move(leaf));
      }
    }
  }
  std::map<int, std::vector<Branch>> numa_by_package;
  std::vector<Branch> top;
  for (const auto& n : t.numa_nodes()) {
    Branch b{NumaLine(n), std::move(by_numa[static_cast<int>(n.os_index())])};
    const int pkg = package_of_numa(n);
    if (pkg >= 0) {
      numa_by_package[pkg].push_back(std::move(b));
    } else {
      top.push_back(std::move(b));
    }
  }
  std::vector<Branch> packages;
  for (const auto& p : t.cpu_packages()) {
    const int id = static_cast<int>(p.os_index());
    Branch b{PackageLine(p), std::move(numa_by_package[id])};
    for (auto& d : by_package[id]) b.children.push_back(std::move(d));
    numa_by_package.erase(id);
    by_package.erase(id);
    packages.push_back(std::move(b));
  }
  // A NUMA node or device naming a package the list lacks: keep it visible rather than drop it.
  for (auto& [id, numas] : numa_by_package) {
    for (auto& n : numas) top.push_back(std::move(n));
  }
  for (auto& [id, devices] : by_package) {
    for (auto& d : devices) elsewhere.push_back(std::move(d));
  }
  top.insert(top.begin(), std::make_move_iterator(packages.begin()),
             std::make_move_iterator(packages.end()));
  if (!elsewhere.empty()) {
    top.push_back({packaged ? "not local to one package" : "not local to one NUMA node",
                   std::move(elsewhere)});
  }
  RenderBranches(top, "  ", out);
  return out;
}

std::string NodeConditions(const v1::NodeStatus& node, int64_t now_ms) {
  if (node.conditions().empty()) return "  <none>\n";
  std::vector<std::vector<std::string>> rows = {{"TYPE", "STATUS", "SINCE", "REASON", "MESSAGE"}};
  for (const auto& c : node.conditions()) {
    rows.push_back({c.type(), c.status(), c.unix_ms() == 0 ? "-" : Age(c.unix_ms(), now_ms),
                    c.reason().empty() ? "-" : c.reason(),
                    c.message().empty() ? "-" : c.message()});
  }
  const std::string table = RenderTable(rows);
  std::string out;
  for (size_t start = 0; start < table.size();) {
    const size_t nl = table.find('\n', start);
    // Trailing spaces of the last column's padding are noise in a terminal and in grep.
    std::string line = table.substr(start, nl - start);
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += "  " + line + "\n";
    if (nl == std::string::npos) break;
    start = nl + 1;
  }
  return out;
}

namespace {

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
  out += "Conditions:\n" + NodeConditions(node, now_ms);
  out += Field("Topology", info.topology().source());
  out += TopologyTree(info);
  out += "Accelerators:\n" + Accelerators(info);
  out += "Allocatable:\n" + SortedLines(info.allocatable(), true);
  out += "Labels:\n" + SortedLines(info.labels(), false);
  if (!info.discovered_labels().empty()) {
    out += "Discovered labels:\n" + SortedLines(info.discovered_labels(), false);
  }
  return out;
}

}  // namespace trainlet::cli
