// Node topology discovery: what the agent reports about its machine's CPUs, memory, NUMA nodes,
// GPUs and network devices, read through hwloc (2.x).
//
// This is the agent's seam over the hardware: tests and `trainletctl local up` pass an hwloc XML
// export (`lstopo --of xml`) instead of probing the machine, so one box can impersonate a
// two-socket GPU server. Fixtures live in tests/fixtures/.
//
// Threading: DiscoverTopology may be called from any thread; each call builds and frees its own
// hwloc topology. Probing the real machine reads sysfs/procfs and can take tens to hundreds of
// milliseconds on a large server, so an event loop should call it before it starts polling or
// off the loop.
#pragma once

#include <string>

#include "common/platform/env.h"
#include "common/status.h"
#include "trainlet/accelerator_plugin.h"
#include "trainlet/v1/node.pb.h"

namespace trainlet::agent {

// Discovers this machine with hwloc when `xml_path` is empty, else loads that hwloc XML export.
//
// Fills every field of v1::Topology:
//  - packages, cores, pus: object counts. On the live machine these are the PUs the process may
//    use (a cgroup or cpuset limits them); an XML file reports what it holds.
//  - memory_bytes: total memory of all NUMA nodes; numa_nodes: os_index, local memory, cpuset.
//  - gpus: PCI display/3D devices (class 0x03xx) from NVIDIA, AMD or Intel, and any PCI device
//    under which a compute backend (CUDA, NVML, ROCm SMI, Level Zero, OpenCL, ...) found a GPU or
//    co-processor. DRM nodes alone (card0, renderD128) do not make a GPU of another vendor: every
//    server BMC's VGA controller has them.
//  - nics: PCI network devices (class 0x02xx, InfiniBand 0x0207 included, and 0x0c06, the class
//    older InfiniBand HCAs report), os_devices holding their netdev and OpenFabrics (verbs) names.
//  - A device's numa_node is the os_index of the one NUMA node local to its nearest CPU-side
//    ancestor, -1 when that ancestor spans several NUMA nodes or none; local_cpuset is that
//    ancestor's cpuset. Devices are listed in hwloc's order (PCI bus order).
//  - cpu_packages: each package (socket) in os_index order, with its PUs, cores, CPU model and
//    the memory of its NUMA nodes. A NUMA node's package, and a device's, is the package whose
//    PUs include all of the node's (the device's nearest CPU-side ancestor's) PUs; -1 when they
//    span packages or there are none (a memory-only NUMA node).
//  - cpu_model: the CPUModel hwloc read for the first package ("" when unknown).
//  - source: "hwloc" for the live machine, "xml:<path>" for a file. hwloc itself honours the
//    HWLOC_XMLFILE environment variable for live discovery; when set, source says "xml:<it>".
//
// When `live_xml` is not null it is set to hwloc's XML export of what was discovered if that is
// the live machine (source "hwloc"), else to "": what trainlet-pmix loads instead of discovering
// the machine again (common/pmix/node_topology_xml.h).
//
// Errors: a file that cannot be read (NotFound when it does not exist, Io otherwise) or that
// hwloc rejects (Invalid) returns a Status naming the path and the reason; a failure of hwloc on
// the live machine returns Internal.
Result<v1::Topology> DiscoverTopology(const std::string& xml_path, std::string* live_xml = nullptr);

// Where an agent's hardware facts come from: its topology, and the sources its accelerator
// plugins read.
struct NodeHardware {
  v1::Topology topology;
  std::string live_xml;  // DiscoverTopology's export of this machine; "" when not this machine
  AcceleratorEnv accelerator_env;
};

// The agent's hardware: this machine (both arguments empty); another machine's hwloc XML
// (`topology_xml`, live accelerator sources off); or, as a testing aid, an Apple Silicon Mac from
// captured `sysctl`/`ioreg` output at `apple_fixture` (a path prefix, e.g.
// "tests/fixtures/macos/m2-ultra": see plugins/accelerator/apple/apple_fixture.h), whose
// topology is the Mac's unless `topology_xml` is given too. Errors are DiscoverTopology's and
// LoadAppleFixture's, the latter prefixed with "--apple-fixture: ".
Result<NodeHardware> DiscoverNodeHardware(const std::string& topology_xml,
                                          const std::string& apple_fixture);

// Publishes `live_xml` for trainlet-pmix as <state_dir>/topology.xml (node_topology_xml.h;
// 0644, replaced atomically), or removes that file when `live_xml` is "" (the agent impersonates
// another machine). Errors (Io) name the file; the caller only warns: without the file libpmix
// discovers the machine itself.
Status PublishTopologyXml(platform::Env& env, const std::string& state_dir,
                          const std::string& live_xml);

// A one-line, hostname-free summary for logs, e.g.
// "2 packages, 112 cores, 224 PUs, 2 NUMA, 2015 GiB, 8 GPUs (nvidia), 10 NICs".
// Memory is rounded down to GiB (MiB below 1 GiB); the GPU vendors are listed once each in order
// of first appearance, "?" for an unknown vendor, and omitted when there are no GPUs.
std::string SummarizeTopology(const v1::Topology& topology);

}  // namespace trainlet::agent
