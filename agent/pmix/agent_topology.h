// The node's hwloc topology as the agent discovered it, loaded by trainlet-pmix from the agent's
// XML export (common/pmix/node_topology_xml.h) for libpmix, so that PMIx_server_init does not
// discover the machine again (hwloc reading sysfs and every PCI device's config space).
//
// The topology is loaded as this machine's (HWLOC_TOPOLOGY_FLAG_IS_THISSYSTEM: binding and
// queries through it act on this machine, as on a discovered one), restricted to the CPUs and
// memory this process may use, read from the OS now (THISSYSTEM_ALLOWED_RESOURCES: the server
// runs in the ranks' cgroup, whose cpuset may be narrower than the agent's), and with the I/O
// devices libpmix itself keeps (HWLOC_TYPE_FILTER_KEEP_IMPORTANT, as the agent discovers them).
// hwloc's discovery plugins (pci, gl, opencl), which an XML load never uses, are left out
// (HWLOC_PLUGINS_BLACKLIST, added to during Load and then restored): they bring libpciaccess,
// libX11, libxcb and libOpenCL into the dynamic loader's work, 11 of the server's 40 library
// inits. A Load that fails destroys its topology, hwloc unloads its plugins, and a later
// discovery (libpmix's) loads them all again.
//
// Threads: Load changes the process's environment (setenv): call it before any other thread of
// the process may read the environment, as trainlet-pmix does before PMIx_server_init.
//
// Ownership: the object owns the hwloc topology and destroys it; libpmix, handed it with
// PMIX_TOPOLOGY2, treats it as external and never frees it, so the object must outlive
// PMIx_server_finalize. Not copyable; movable. Any one thread at a time.
#pragma once

#include <hwloc.h>

#include <string>

#include "common/status.h"

namespace trainlet::pmix {

class AgentTopology {
 public:
  // Loads `xml_path`. Errors: NotFound/Io when it cannot be read, Invalid when hwloc rejects it;
  // each names the path. The caller then lets libpmix discover the machine.
  static Result<AgentTopology> Load(const std::string& xml_path);

  AgentTopology(AgentTopology&& other) noexcept;
  AgentTopology& operator=(AgentTopology&& other) noexcept;
  AgentTopology(const AgentTopology&) = delete;
  AgentTopology& operator=(const AgentTopology&) = delete;
  ~AgentTopology();

  // Valid while this object lives.
  hwloc_topology_t get() const { return topology_; }

 private:
  explicit AgentTopology(hwloc_topology_t topology) : topology_(topology) {}
  hwloc_topology_t topology_ = nullptr;
};

}  // namespace trainlet::pmix
