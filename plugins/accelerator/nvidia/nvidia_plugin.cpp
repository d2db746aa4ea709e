#include "plugins/accelerator/nvidia/nvidia_plugin.h"

#include "plugins/accelerator/label_value.h"
#include "plugins/accelerator/nvidia/nvml_library.h"
#include "plugins/accelerator/pci_sysfs.h"

namespace trainlet {
namespace {

constexpr uint32_t kVendorNvidia = 0x10de;

class NvidiaPlugin final : public AcceleratorPlugin {
 public:
  std::string_view name() const override { return "nvidia"; }
  std::string_view resource_name() const override { return "nvidia.com/gpu"; }

  PluginResult<AcceleratorReport> Discover(const v1::Topology& topology,
                                           const AcceleratorEnv& env) override {
    AcceleratorReport report;
    std::vector<std::string> bus_ids;
    for (const v1::PciDevice& gpu : topology.gpus()) {
      if (gpu.vendor_id() != kVendorNvidia) continue;
      report.accelerators.push_back(accelerator::AcceleratorFromPci(
          gpu, "nvidia", static_cast<uint32_t>(report.accelerators.size()), env.sysfs_root));
      bus_ids.push_back(gpu.pci_bus_id());
    }
    if (report.accelerators.empty()) return report;

    nvml_.reset();
    auto nvml = accelerator::NvmlLibrary::Open(env.nvml_library);
    if (!nvml.ok()) {
      report.notes.push_back(nvml.status().message() + "; GPU health is unknown");
    } else {
      nvml_ = std::move(*nvml);
      nvml_->WatchXids(bus_ids);
      for (v1::Accelerator& a : report.accelerators) {
        auto info = nvml_->Describe(a.pci_bus_id());
        if (!info.ok()) {
          report.notes.push_back(info.status().message());
          continue;
        }
        if (!info->uuid.empty()) a.set_uuid(info->uuid);
        if (!info->name.empty()) a.set_model(info->name);
        a.set_memory_bytes(info->memory_bytes);
        a.set_health("ok");
      }
      RefreshHealth(&report.accelerators);
    }

    const v1::Accelerator& first = report.accelerators.front();
    report.labels["nvidia.com/gpu.present"] = "true";
    report.labels["nvidia.com/gpu.count"] = std::to_string(report.accelerators.size());
    report.labels["trainlet.io/gpu-vendor"] = "nvidia";
    if (!first.model().empty()) {
      report.labels["nvidia.com/gpu.product"] = accelerator::LabelValue(first.model());
      report.labels["trainlet.io/gpu-model"] = accelerator::LabelValue(first.model());
    }
    if (first.memory_bytes() != 0) {
      report.labels["nvidia.com/gpu.memory"] = std::to_string(first.memory_bytes() >> 20);  // MiB
    }
    return report;
  }

  void RefreshHealth(std::vector<v1::Accelerator>* accelerators) override {
    if (nvml_ == nullptr) return;
    const auto xids = nvml_->PollFatalXids();
    for (v1::Accelerator& a : *accelerators) {
      if (a.vendor() != "nvidia" || a.health() == "unknown") continue;
      if (a.health().starts_with("unhealthy")) continue;  // sticky until the agent restarts
      if (auto it = xids.find(a.pci_bus_id()); it != xids.end()) {
        a.set_health("unhealthy: XID " + std::to_string(it->second));
      } else if (uint64_t dbe = nvml_->DoubleBitEccErrors(a.pci_bus_id()); dbe != 0) {
        a.set_health("unhealthy: " + std::to_string(dbe) + " double-bit ECC errors");
      }
    }
  }

  std::map<std::string, std::string> VisibleDevicesEnv(
      const std::vector<uint32_t>& indexes) const override {
    std::string list;
    for (uint32_t i : indexes) list += (list.empty() ? "" : ",") + std::to_string(i);
    return {{"CUDA_VISIBLE_DEVICES", list}, {"CUDA_DEVICE_ORDER", "PCI_BUS_ID"}};
  }

 private:
  // Held open between Discover and RefreshHealth: XID events reach only a registered event set.
  std::unique_ptr<accelerator::NvmlLibrary> nvml_;
};

}  // namespace

std::unique_ptr<AcceleratorPlugin> MakeNvidiaAcceleratorPlugin() {
  return std::make_unique<NvidiaPlugin>();
}

}  // namespace trainlet
