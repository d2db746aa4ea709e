// What Linux sysfs says about one PCI device, shared by the PCI accelerator plugins (nvidia,
// amd). Reads <sysfs_root>/bus/pci/devices/<bus id>/{numa_node,local_cpulist,...}; tests point
// sysfs_root at a fake tree in a temp dir. Pure functions over files, safe from any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "trainlet/v1/node.pb.h"

namespace trainlet::accelerator {

// The first line of <sysfs_root>/bus/pci/devices/<pci_bus_id>/<attribute>, trailing whitespace
// dropped; nullopt when sysfs_root is "" or the file is missing or unreadable (sysfs attributes
// come and go with drivers, so absence is normal, not an error).
std::optional<std::string> ReadPciAttribute(const std::string& sysfs_root,
                                            const std::string& pci_bus_id,
                                            const std::string& attribute);

// A new Accelerator for a GPU hwloc found: vendor, model (hwloc's name), bus id, NUMA node and
// local cpuset from hwloc, then replaced by sysfs's numa_node / local_cpulist where those files
// exist (sysfs is what the kernel uses; an XML file may be stale). health is "unknown".
v1::Accelerator AcceleratorFromPci(const v1::PciDevice& gpu, const std::string& vendor,
                                   uint32_t index, const std::string& sysfs_root);

}  // namespace trainlet::accelerator
