#include "plugins/accelerator/pci_sysfs.h"

#include <fstream>

#include "common/cpulist.h"

namespace trainlet::accelerator {

std::optional<std::string> ReadPciAttribute(const std::string& sysfs_root,
                                            const std::string& pci_bus_id,
                                            const std::string& attribute) {
  if (sysfs_root.empty() || pci_bus_id.empty()) return std::nullopt;
  std::ifstream in(sysfs_root + "/bus/pci/devices/" + pci_bus_id + "/" + attribute);
  std::string line;
  if (!in || !std::getline(in, line)) return std::nullopt;
  while (!line.empty() && (line.back() == ' ' || line.back() == '\n' || line.back() == '\r' ||
                           line.back() == '\t')) {
    line.pop_back();
  }
  return line;
}

v1::Accelerator AcceleratorFromPci(const v1::PciDevice& gpu, const std::string& vendor,
                                   uint32_t index, const std::string& sysfs_root) {
  v1::Accelerator a;
  a.set_vendor(vendor);
  a.set_model(gpu.name());
  a.set_pci_bus_id(gpu.pci_bus_id());
  a.set_numa_node(gpu.numa_node());
  a.set_local_cpuset(gpu.local_cpuset());
  a.set_health("unknown");
  a.set_index(index);
  if (auto numa = ReadPciAttribute(sysfs_root, gpu.pci_bus_id(), "numa_node")) {
    try {
      a.set_numa_node(std::stoi(*numa));  // -1 on a machine without NUMA information
    } catch (const std::exception&) {
      // Not a number: keep hwloc's value.
    }
  }
  if (auto cpus = ReadPciAttribute(sysfs_root, gpu.pci_bus_id(), "local_cpulist")) {
    // Normalised through the parser, so "0-3,8" reads the same whichever tool wrote it.
    if (auto parsed = ParseCpuList(*cpus); parsed.ok()) {
      a.set_local_cpuset(FormatCpuList(*parsed));
    }
  }
  return a;
}

}  // namespace trainlet::accelerator
