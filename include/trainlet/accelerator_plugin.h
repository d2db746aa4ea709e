// The accelerator plugin interface: how the agent finds a vendor's accelerators (GPUs), their
// NUMA locality and health, and what environment hands a subset of them to a worker.
//
// Plugins are plain classes built by a factory and listed in one ordered table
// (plugins/accelerator/registry.cpp). The agent makes one instance of each at start-up and owns
// them; an instance may hold a vendor library open between calls (NVML's event set), so it is
// called from one thread at a time (the agent calls it from its loop, or before the loop starts).
//
// A plugin never requires its vendor's library to build or to run: without it, the plugin still
// reports what PCI and sysfs show, and health says "unknown".
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "trainlet/plugin_result.h"
#include "trainlet/v1/node.pb.h"

namespace trainlet {

// The OS seam for discovery: where the plugins look. Tests point it at fake trees and captured
// outputs; an agent impersonating another machine (--topology-xml) turns the live sources off,
// since they describe this machine, not the file's.
struct AcceleratorEnv {
  // Root of sysfs ("/sys"). "" reads nothing from sysfs: the hwloc topology alone is used.
  std::string sysfs_root = "/sys";
  // The NVML library dlopen() loads ("libnvidia-ml.so.1", or a path). "" never loads NVML.
  std::string nvml_library = "libnvidia-ml.so.1";
  // Apple: when true, query this Mac (sysctl and ioreg; only on macOS). Otherwise the plugin
  // parses apple_sysctl_text / apple_ioreg_text when given (captured `sysctl` and
  // `ioreg -rc AGXAccelerator` outputs), and finds nothing when they are empty.
  bool apple_live = true;
  std::string apple_sysctl_text;
  std::string apple_ioreg_text;
};

// What one plugin found.
struct AcceleratorReport {
  std::vector<v1::Accelerator> accelerators;  // in the vendor's index order
  std::map<std::string, std::string> labels;  // e.g. trainlet.io/gpu-model, nvidia.com/gpu.present
  std::vector<std::string> notes;             // why something is unknown, for the agent's log
};

class AcceleratorPlugin {
 public:
  virtual ~AcceleratorPlugin() = default;
  // "nvidia", "amd", "apple": the v1::Accelerator.vendor it reports. Constant.
  virtual std::string_view name() const = 0;
  // The Kubernetes extended resource its devices count towards ("nvidia.com/gpu"). Constant.
  virtual std::string_view resource_name() const = 0;

  // Finds this vendor's accelerators. `topology` is what hwloc saw (or the impersonated XML); the
  // plugin adds what `env`'s sources say. Finding none is not an error. Errors are reserved for
  // sources that exist but are unreadable or malformed (a captured output that does not parse);
  // the message names the source.
  virtual PluginResult<AcceleratorReport> Discover(const v1::Topology& topology,
                                                   const AcceleratorEnv& env) = 0;

  // Re-reads the health of `accelerators` (as Discover returned them) in place: a device that
  // became unhealthy stays so ("unhealthy: XID 79"). A plugin with no health source leaves them
  // as they are. Cheap enough for a periodic check; never blocks on the device.
  virtual void RefreshHealth(std::vector<v1::Accelerator>* accelerators) { (void)accelerators; }

  // The environment that makes exactly `indexes` (v1::Accelerator.index values, in order) the
  // devices a process sees, e.g. {CUDA_VISIBLE_DEVICES: "2,3", CUDA_DEVICE_ORDER: "PCI_BUS_ID"}.
  // Empty for a vendor whose devices cannot be split (Apple).
  virtual std::map<std::string, std::string> VisibleDevicesEnv(
      const std::vector<uint32_t>& indexes) const = 0;
};

// One fresh instance of each built-in plugin, in table order.
std::vector<std::unique_ptr<AcceleratorPlugin>> MakeAcceleratorPlugins();
// Names of the built-in plugins, in table order.
std::vector<std::string> AcceleratorPluginNames();

// Everything the agent reports about its accelerators: every plugin's devices, labels and
// notes, and the allocatable resources of the node: "cpu" (PUs), "memory" (bytes) and one
// entry per plugin resource that found devices (unhealthy devices not counted).
struct NodeAccelerators {
  std::vector<v1::Accelerator> accelerators;
  std::map<std::string, std::string> labels;
  std::map<std::string, int64_t> allocatable;
  std::vector<std::string> notes;  // includes each failed plugin's error, named by plugin
};

// Runs every plugin in `plugins`. A plugin that fails is reported in notes and contributes
// nothing; discovery as a whole does not fail.
NodeAccelerators DiscoverNodeAccelerators(
    const std::vector<std::unique_ptr<AcceleratorPlugin>>& plugins, const v1::Topology& topology,
    const AcceleratorEnv& env);

}  // namespace trainlet
