#include "agent/pmix/agent_topology.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <utility>

namespace trainlet::pmix {
namespace {

// hwloc's discovery plugins left out while the XML is loaded (see the header), and the variable
// restored after: hwloc reads it when it loads its plugins, at a process's first
// hwloc_topology_init, and unloads them when its last topology is destroyed.
class DiscoveryPluginsLeftOut {
 public:
  DiscoveryPluginsLeftOut() {
    const char* was = std::getenv(kVariable);
    if (was != nullptr) was_ = was;
    const std::string more = "hwloc_pci,hwloc_gl,hwloc_opencl";
    setenv(kVariable, (was_ && !was_->empty() ? *was_ + "," + more : more).c_str(), 1);
  }
  ~DiscoveryPluginsLeftOut() {
    if (was_) {
      setenv(kVariable, was_->c_str(), 1);
    } else {
      unsetenv(kVariable);
    }
  }
  DiscoveryPluginsLeftOut(const DiscoveryPluginsLeftOut&) = delete;
  DiscoveryPluginsLeftOut& operator=(const DiscoveryPluginsLeftOut&) = delete;

 private:
  static constexpr const char* kVariable = "HWLOC_PLUGINS_BLACKLIST";
  std::optional<std::string> was_;
};

}  // namespace

Result<AgentTopology> AgentTopology::Load(const std::string& xml_path) {
  struct stat st {};
  if (stat(xml_path.c_str(), &st) != 0) {
    const std::string why = "hwloc XML " + xml_path + ": " + std::strerror(errno);
    return errno == ENOENT ? NotFoundError(why) : IoError(why);
  }
  const DiscoveryPluginsLeftOut left_out;  // before the init below, which loads the plugins
  hwloc_topology_t raw = nullptr;
  if (hwloc_topology_init(&raw) != 0)
    return InternalError(std::string("hwloc_topology_init: ") + std::strerror(errno));
  AgentTopology topology(raw);  // destroys `raw` on every error below
  if (hwloc_topology_set_io_types_filter(raw, HWLOC_TYPE_FILTER_KEEP_IMPORTANT) != 0 ||
      hwloc_topology_set_flags(raw, HWLOC_TOPOLOGY_FLAG_IS_THISSYSTEM |
                                        HWLOC_TOPOLOGY_FLAG_THISSYSTEM_ALLOWED_RESOURCES) != 0)
    return InternalError(std::string("hwloc topology settings: ") + std::strerror(errno));
  if (hwloc_topology_set_xml(raw, xml_path.c_str()) != 0)
    return InvalidError("hwloc XML " + xml_path + ": rejected: " + std::strerror(errno));
  if (hwloc_topology_load(raw) != 0)
    return InvalidError("hwloc XML " + xml_path +
                        ": not a valid topology: " + std::strerror(errno));
  return topology;
}

AgentTopology::AgentTopology(AgentTopology&& other) noexcept
    : topology_(std::exchange(other.topology_, nullptr)) {}

AgentTopology& AgentTopology::operator=(AgentTopology&& other) noexcept {
  if (this != &other) {
    if (topology_ != nullptr) hwloc_topology_destroy(topology_);
    topology_ = std::exchange(other.topology_, nullptr);
  }
  return *this;
}

AgentTopology::~AgentTopology() {
  if (topology_ != nullptr) hwloc_topology_destroy(topology_);
}

}  // namespace trainlet::pmix
