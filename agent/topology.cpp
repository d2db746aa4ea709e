#include "agent/topology.h"

#include <hwloc.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string_view>
#include <vector>

#include "agent/rank_binding.h"
#include "common/cpulist.h"
#include "common/pmix/node_topology_xml.h"
#include "plugins/accelerator/apple/apple_fixture.h"

namespace trainlet::agent {
namespace {

struct TopologyDeleter {
  void operator()(hwloc_topology* t) const { hwloc_topology_destroy(t); }
};
using TopologyPtr = std::unique_ptr<hwloc_topology, TopologyDeleter>;

struct BitmapDeleter {
  void operator()(hwloc_bitmap_s* b) const { hwloc_bitmap_free(b); }
};
using BitmapPtr = std::unique_ptr<hwloc_bitmap_s, BitmapDeleter>;

constexpr unsigned kVendorNvidia = 0x10de;
constexpr unsigned kVendorAmd = 0x1002;
constexpr unsigned kVendorAmdCpu = 0x1022;
constexpr unsigned kVendorIntel = 0x8086;
constexpr unsigned kVendorMellanox = 0x15b3;
constexpr unsigned kVendorBroadcom = 0x14e4;

constexpr unsigned kClassBaseDisplay = 0x03;         // VGA 0x0300, XGA 0x0301, 3D 0x0302, other
constexpr unsigned kClassBaseNetwork = 0x02;         // Ethernet 0x0200, InfiniBand 0x0207, other
constexpr unsigned kClassInfinibandSerial = 0x0c06;  // old IB HCAs report "serial bus: InfiniBand"

std::string VendorName(unsigned vendor_id) {
  switch (vendor_id) {
    case kVendorNvidia:
      return "nvidia";
    case kVendorAmd:
    case kVendorAmdCpu:
      return "amd";
    case kVendorIntel:
      return "intel";
    case kVendorMellanox:
      return "mellanox";
    case kVendorBroadcom:
      return "broadcom";
    default:
      return "";
  }
}

// A cpuset as a Linux cpulist. An infinite set (hwloc allows them) is clipped to the machine.
std::string CpusetToList(hwloc_topology_t topo, hwloc_const_bitmap_t set) {
  if (set == nullptr) return "";
  BitmapPtr finite;
  if (hwloc_bitmap_weight(set) < 0) {
    finite.reset(hwloc_bitmap_alloc());
    TRAINLET_CHECK(finite != nullptr);
    hwloc_bitmap_and(finite.get(), set, hwloc_topology_get_complete_cpuset(topo));
    set = finite.get();
  }
  std::vector<unsigned> cpus;
  for (int i = hwloc_bitmap_first(set); i >= 0; i = hwloc_bitmap_next(set, i)) {
    cpus.push_back(static_cast<unsigned>(i));
  }
  return FormatCpuList(cpus);
}

std::string InfoOrEmpty(hwloc_obj_t obj, const char* name) {
  const char* value = hwloc_obj_get_info_by_name(obj, name);
  return value != nullptr ? value : "";
}

bool IsDrmNode(std::string_view name) {
  return name.starts_with("card") || name.starts_with("renderD") || name.starts_with("controlD");
}

// A compute backend (not the kernel's DRM layer) found a GPU or co-processor here.
bool IsComputeOsDevice(hwloc_obj_t osdev) {
  const hwloc_obj_osdev_type_t type = osdev->attr->osdev.type;
  if (type == HWLOC_OBJ_OSDEV_COPROC) return true;
  if (type != HWLOC_OBJ_OSDEV_GPU) return false;
  if (osdev->subtype != nullptr && std::string_view(osdev->subtype) == "DRM") return false;
  return osdev->name != nullptr && !IsDrmNode(osdev->name);
}

bool IsGpu(hwloc_obj_t pci, const std::vector<hwloc_obj_t>& osdevs) {
  const unsigned class_id = pci->attr->pcidev.class_id;
  const unsigned vendor = pci->attr->pcidev.vendor_id;
  if ((class_id >> 8) == kClassBaseDisplay &&
      (vendor == kVendorNvidia || vendor == kVendorAmd || vendor == kVendorIntel)) {
    return true;
  }
  return std::any_of(osdevs.begin(), osdevs.end(), IsComputeOsDevice);
}

bool IsNic(hwloc_obj_t pci) {
  const unsigned class_id = pci->attr->pcidev.class_id;
  return (class_id >> 8) == kClassBaseNetwork || class_id == kClassInfinibandSerial;
}

std::vector<hwloc_obj_t> OsDevicesOf(hwloc_obj_t pci) {
  std::vector<hwloc_obj_t> out;
  for (hwloc_obj_t child = pci->io_first_child; child != nullptr; child = child->next_sibling) {
    if (child->type == HWLOC_OBJ_OS_DEVICE) out.push_back(child);
  }
  return out;
}

std::string PciBusId(hwloc_obj_t pci) {
  const auto& a = pci->attr->pcidev;
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%04x:%02x:%02x.%x", static_cast<unsigned>(a.domain), a.bus,
                a.dev, a.func);
  return buf;
}

// The os_index of the one package whose PUs include all of `set`: -1 for an empty set, one that
// spans packages, or a machine without package objects.
int PackageOf(hwloc_topology_t topo, hwloc_const_bitmap_t set) {
  if (set == nullptr || hwloc_bitmap_iszero(set)) return -1;
  for (hwloc_obj_t pkg = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_PACKAGE, nullptr);
       pkg != nullptr; pkg = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_PACKAGE, pkg)) {
    if (hwloc_bitmap_isincluded(set, pkg->cpuset)) return static_cast<int>(pkg->os_index);
  }
  return -1;
}

// Every package with its PUs, in os_index order. Memory is filled in once the NUMA nodes are.
void AddPackages(hwloc_topology_t topo, v1::Topology& out) {
  for (hwloc_obj_t pkg = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_PACKAGE, nullptr);
       pkg != nullptr; pkg = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_PACKAGE, pkg)) {
    v1::CpuPackage* p = out.add_cpu_packages();
    p->set_os_index(pkg->os_index);
    p->set_cpuset(CpusetToList(topo, pkg->cpuset));
    p->set_cpu_model(InfoOrEmpty(pkg, "CPUModel"));
    const int cores = hwloc_get_nbobjs_inside_cpuset_by_type(topo, pkg->cpuset, HWLOC_OBJ_CORE);
    const int pus = hwloc_get_nbobjs_inside_cpuset_by_type(topo, pkg->cpuset, HWLOC_OBJ_PU);
    p->set_cores(cores > 0 ? static_cast<uint32_t>(cores) : 0);
    p->set_pus(pus > 0 ? static_cast<uint32_t>(pus) : 0);
  }
  std::sort(
      out.mutable_cpu_packages()->begin(), out.mutable_cpu_packages()->end(),
      [](const v1::CpuPackage& a, const v1::CpuPackage& b) { return a.os_index() < b.os_index(); });
}

v1::PciDevice DescribePciDevice(hwloc_topology_t topo, hwloc_obj_t pci,
                                const std::vector<hwloc_obj_t>& osdevs,
                                v1::PciDevice::Class device_class) {
  v1::PciDevice dev;
  dev.set_device_class(device_class);
  dev.set_pci_bus_id(PciBusId(pci));
  dev.set_vendor_id(pci->attr->pcidev.vendor_id);
  dev.set_device_id(pci->attr->pcidev.device_id);
  dev.set_vendor(VendorName(pci->attr->pcidev.vendor_id));
  std::string name = InfoOrEmpty(pci, "PCIDevice");
  for (size_t i = 0; name.empty() && i < osdevs.size(); ++i)
    name = InfoOrEmpty(osdevs[i], "GPUModel");
  dev.set_name(name);

  // I/O objects hang off the CPU-side object (package, NUMA group, machine) whose PUs are local
  // to their root complex. That object's nodeset says which NUMA node, if exactly one, is near.
  int numa_node = -1;
  hwloc_obj_t ancestor = hwloc_get_non_io_ancestor_obj(topo, pci);
  if (ancestor != nullptr) {
    if (ancestor->nodeset != nullptr && hwloc_bitmap_weight(ancestor->nodeset) == 1) {
      numa_node = hwloc_bitmap_first(ancestor->nodeset);
    }
    dev.set_local_cpuset(CpusetToList(topo, ancestor->cpuset));
  }
  dev.set_numa_node(numa_node);
  dev.set_package(ancestor != nullptr ? PackageOf(topo, ancestor->cpuset) : -1);

  for (hwloc_obj_t osdev : osdevs) {
    if (osdev->name == nullptr) continue;
    const hwloc_obj_osdev_type_t type = osdev->attr->osdev.type;
    // A NIC's useful names are its netdev and its verbs device; a GPU's are all of them.
    if (device_class == v1::PciDevice::CLASS_NIC && type != HWLOC_OBJ_OSDEV_NETWORK &&
        type != HWLOC_OBJ_OSDEV_OPENFABRICS) {
      continue;
    }
    dev.add_os_devices(osdev->name);
  }
  return dev;
}

// Checked before hwloc sees the file, because hwloc reports a missing file and a malformed one
// alike (EINVAL, with details only on stderr under HWLOC_XML_VERBOSE).
Status CheckReadable(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (in) return Status::Ok();
  const int err = errno;
  std::string msg = "hwloc XML topology \"" + path + "\": cannot read: " + std::strerror(err);
  return err == ENOENT ? NotFoundError(std::move(msg)) : IoError(std::move(msg));
}

// hwloc loads its plugins at the first hwloc_topology_init and unloads them with the last
// topology. Its libxml2 XML plugin brings libxml2, ICU and libstdc++.so, and libstdc++.so cannot
// be unloaded (it has unique symbols): it stayed mapped for the agent's life, 0.9 MiB of idle
// RSS and a second C++ runtime beside the static agent's own. hwloc's built-in XML parser reads
// what hwloc exports (--topology-xml, HWLOC_XMLFILE), so the plugin is left out while the
// topology is made, unless the operator set HWLOC_PLUGINS_BLACKLIST. Called before the agent
// starts any thread, so changing the environment is safe.
class LibxmlPluginLeftOut {
 public:
  LibxmlPluginLeftOut() : set_(std::getenv(kVariable) == nullptr) {
    if (set_) setenv(kVariable, "hwloc_xml_libxml", 0);
  }
  ~LibxmlPluginLeftOut() {
    if (set_) unsetenv(kVariable);  // not passed on to the ranks
  }
  LibxmlPluginLeftOut(const LibxmlPluginLeftOut&) = delete;
  LibxmlPluginLeftOut& operator=(const LibxmlPluginLeftOut&) = delete;

 private:
  static constexpr const char* kVariable = "HWLOC_PLUGINS_BLACKLIST";
  const bool set_;
};

// Initialises and loads `topo` from `xml_path`, or, when it is empty, from this machine (or from
// HWLOC_XMLFILE, which hwloc reads itself). `source` says which, for v1::Topology::source.
Status LoadHwlocTopology(const std::string& xml_path, TopologyPtr& topo, std::string& source) {
  hwloc_topology_t raw = nullptr;
  if (hwloc_topology_init(&raw) != 0) {
    return InternalError(std::string("hwloc_topology_init: ") + std::strerror(errno));
  }
  topo.reset(raw);

  // Keep PCI devices and OS devices that matter (GPUs, NICs, disks), and the bridges above them.
  if (hwloc_topology_set_io_types_filter(topo.get(), HWLOC_TYPE_FILTER_KEEP_IMPORTANT) != 0) {
    return InternalError(std::string("hwloc_topology_set_io_types_filter: ") +
                         std::strerror(errno));
  }

  source = "hwloc";
  if (!xml_path.empty()) {
    TRAINLET_RETURN_IF_ERROR(CheckReadable(xml_path));
    // Not HWLOC_TOPOLOGY_FLAG_IS_THISSYSTEM: the file describes another machine, so hwloc must
    // not bind or query this one through it.
    if (hwloc_topology_set_xml(topo.get(), xml_path.c_str()) != 0) {
      return InvalidError(
          "hwloc XML topology \"" + xml_path +
          "\": hwloc rejected it (not hwloc XML, malformed or truncated): " + std::strerror(errno));
    }
    source = "xml:" + xml_path;
  } else if (const char* env = std::getenv("HWLOC_XMLFILE"); env != nullptr && *env != '\0') {
    source = std::string("xml:") + env;  // hwloc loads this file instead of probing
  }

  if (hwloc_topology_load(topo.get()) != 0) {
    const std::string why = std::strerror(errno);
    if (xml_path.empty()) return InternalError("hwloc_topology_load: " + why);
    return InvalidError("hwloc XML topology \"" + xml_path +
                        "\": not a valid hwloc topology: " + why);
  }
  return Status::Ok();
}

// hwloc's (v2) XML export of `topo`; "" when hwloc cannot export it (the caller then has no file
// to hand over, which only costs trainlet-pmix a discovery of its own).
std::string ExportXml(hwloc_topology_t topo) {
  char* buffer = nullptr;
  int length = 0;
  if (hwloc_topology_export_xmlbuffer(topo, &buffer, &length, 0) != 0 || buffer == nullptr)
    return "";
  std::string xml(buffer, length > 0 ? static_cast<size_t>(length - 1) : 0);  // less its NUL
  hwloc_free_xmlbuffer(topo, buffer);
  return xml;
}

// The NUMA nodes, each package's memory, and the machine's memory.
void AddNumaNodes(hwloc_topology_t topo, v1::Topology& out) {
  uint64_t memory = 0;
  for (hwloc_obj_t node = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE, nullptr);
       node != nullptr; node = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE, node)) {
    v1::NumaNode* numa = out.add_numa_nodes();
    numa->set_os_index(node->os_index);
    numa->set_memory_bytes(node->attr->numanode.local_memory);
    numa->set_cpuset(CpusetToList(topo, node->cpuset));
    numa->set_package(PackageOf(topo, node->cpuset));
    for (v1::CpuPackage& p : *out.mutable_cpu_packages()) {
      if (static_cast<int>(p.os_index()) == numa->package()) {
        p.set_memory_bytes(p.memory_bytes() + node->attr->numanode.local_memory);
      }
    }
    memory += node->attr->numanode.local_memory;
  }
  // Sum of the NUMA nodes' memory, which is what hwloc puts in the root's total_memory too; the
  // loop also covers machines whose root total is not filled in.
  out.set_memory_bytes(std::max<uint64_t>(memory, hwloc_get_root_obj(topo)->total_memory));
}

// The PCI devices that are GPUs or NICs.
void AddGpusAndNics(hwloc_topology_t topo, v1::Topology& out) {
  for (hwloc_obj_t pci = hwloc_get_next_pcidev(topo, nullptr); pci != nullptr;
       pci = hwloc_get_next_pcidev(topo, pci)) {
    const std::vector<hwloc_obj_t> osdevs = OsDevicesOf(pci);
    if (IsGpu(pci, osdevs)) {
      *out.add_gpus() = DescribePciDevice(topo, pci, osdevs, v1::PciDevice::CLASS_GPU);
    } else if (IsNic(pci)) {
      *out.add_nics() = DescribePciDevice(topo, pci, osdevs, v1::PciDevice::CLASS_NIC);
    }
  }
}

}  // namespace

Result<v1::Topology> DiscoverTopology(const std::string& xml_path, std::string* live_xml) {
  const LibxmlPluginLeftOut no_libxml;  // read by the first hwloc_topology_init
  TopologyPtr topo;
  std::string source;
  TRAINLET_RETURN_IF_ERROR(LoadHwlocTopology(xml_path, topo, source));
  if (live_xml != nullptr) *live_xml = source == "hwloc" ? ExportXml(topo.get()) : "";

  v1::Topology out;
  out.set_source(source);
  auto count = [&](hwloc_obj_type_t type) {
    const int n = hwloc_get_nbobjs_by_type(topo.get(), type);
    return n > 0 ? static_cast<uint32_t>(n) : 0u;
  };
  out.set_packages(count(HWLOC_OBJ_PACKAGE));
  out.set_cores(count(HWLOC_OBJ_CORE));
  out.set_pus(count(HWLOC_OBJ_PU));

  if (hwloc_obj_t pkg = hwloc_get_obj_by_type(topo.get(), HWLOC_OBJ_PACKAGE, 0)) {
    out.set_cpu_model(InfoOrEmpty(pkg, "CPUModel"));
  }

  AddPackages(topo.get(), out);
  AddNumaNodes(topo.get(), out);
  AddGpusAndNics(topo.get(), out);
  return out;
}

Result<NodeHardware> DiscoverNodeHardware(const std::string& topology_xml,
                                          const std::string& apple_fixture) {
  NodeHardware hw;
  hw.accelerator_env = AcceleratorEnvFor(topology_xml);
  if (apple_fixture.empty()) {
    TRAINLET_ASSIGN_OR_RETURN(hw.topology, DiscoverTopology(topology_xml, &hw.live_xml));
    return hw;
  }
  auto mac = accelerator::LoadAppleFixture(apple_fixture);
  if (!mac.ok()) return Status(mac.status().code(), "--apple-fixture: " + mac.status().message());
  accelerator::UseAppleFixture(*mac, &hw.accelerator_env);
  if (topology_xml.empty()) {
    hw.topology = accelerator::AppleFixtureTopology(*mac);
  } else {
    TRAINLET_ASSIGN_OR_RETURN(hw.topology, DiscoverTopology(topology_xml));
  }
  return hw;
}

Status PublishTopologyXml(platform::Env& env, const std::string& state_dir,
                          const std::string& live_xml) {
  const std::string path = pmix::NodeTopologyXmlPath(state_dir);
  if (path.empty()) return Status::Ok();
  if (!live_xml.empty()) return env.WriteFileAtomically(path, live_xml, 0644);
  if (unlink(path.c_str()) != 0 && errno != ENOENT)
    return IoError("remove " + path + ": " + std::strerror(errno));
  return Status::Ok();
}

std::string SummarizeTopology(const v1::Topology& t) {
  auto counted = [](uint64_t n, const char* one, const char* many) {
    return std::to_string(n) + " " + (n == 1 ? one : many);
  };
  std::string s = counted(t.packages(), "package", "packages") + ", " +
                  counted(t.cores(), "core", "cores") + ", " + counted(t.pus(), "PU", "PUs") +
                  ", " + std::to_string(t.numa_nodes_size()) + " NUMA, ";
  constexpr uint64_t kGiB = uint64_t{1} << 30;
  constexpr uint64_t kMiB = uint64_t{1} << 20;
  s += t.memory_bytes() >= kGiB ? std::to_string(t.memory_bytes() / kGiB) + " GiB"
                                : std::to_string(t.memory_bytes() / kMiB) + " MiB";
  s += ", " + counted(t.gpus_size(), "GPU", "GPUs");
  std::vector<std::string> vendors;
  for (const v1::PciDevice& gpu : t.gpus()) {
    const std::string v = gpu.vendor().empty() ? "?" : gpu.vendor();
    if (std::find(vendors.begin(), vendors.end(), v) == vendors.end()) vendors.push_back(v);
  }
  if (!vendors.empty()) {
    s += " (";
    for (size_t i = 0; i < vendors.size(); ++i) s += (i > 0 ? "/" : "") + vendors[i];
    s += ")";
  }
  s += ", " + counted(t.nics_size(), "NIC", "NICs");
  return s;
}

}  // namespace trainlet::agent
