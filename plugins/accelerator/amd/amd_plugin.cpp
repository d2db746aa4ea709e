#include "plugins/accelerator/amd/amd_plugin.h"

#include <cstdio>

#include "plugins/accelerator/label_value.h"
#include "plugins/accelerator/pci_sysfs.h"

namespace trainlet {
namespace {

constexpr uint32_t kVendorAmd = 0x1002;

class AmdPlugin final : public AcceleratorPlugin {
 public:
  std::string_view name() const override { return "amd"; }
  std::string_view resource_name() const override { return "amd.com/gpu"; }

  PluginResult<AcceleratorReport> Discover(const v1::Topology& topology,
                                           const AcceleratorEnv& env) override {
    AcceleratorReport report;
    uint32_t device_id = 0;
    for (const v1::PciDevice& gpu : topology.gpus()) {
      if (gpu.vendor_id() != kVendorAmd) continue;
      if (report.accelerators.empty()) device_id = gpu.device_id();
      v1::Accelerator a = accelerator::AcceleratorFromPci(
          gpu, "amd", static_cast<uint32_t>(report.accelerators.size()), env.sysfs_root);
      const std::string& bus = gpu.pci_bus_id();
      if (auto vram = accelerator::ReadPciAttribute(env.sysfs_root, bus, "mem_info_vram_total")) {
        try {
          a.set_memory_bytes(std::stoull(*vram));
        } catch (const std::exception&) {
          report.notes.push_back("amd: " + env.sysfs_root + "/bus/pci/devices/" + bus +
                                 "/mem_info_vram_total is not a number: \"" + *vram + "\"");
        }
      }
      if (auto product = accelerator::ReadPciAttribute(env.sysfs_root, bus, "product_name");
          product && !product->empty()) {
        a.set_model(*product);
      }
      if (auto id = accelerator::ReadPciAttribute(env.sysfs_root, bus, "unique_id");
          id && !id->empty()) {
        a.set_uuid("GPU-" + *id);  // the form rocm-smi and ROCR_VISIBLE_DEVICES accept
      }
      report.accelerators.push_back(std::move(a));
    }
    if (report.accelerators.empty()) return report;
    report.notes.push_back("amd: no health source; GPU health is unknown");
    const v1::Accelerator& first = report.accelerators.front();
    report.labels["amd.com/gpu.present"] = "true";
    report.labels["amd.com/gpu.count"] = std::to_string(report.accelerators.size());
    char id[8];
    std::snprintf(id, sizeof id, "%04x", device_id);
    report.labels["amd.com/gpu.device-id"] = id;
    report.labels["trainlet.io/gpu-vendor"] = "amd";
    if (!first.model().empty()) {
      report.labels["trainlet.io/gpu-model"] = accelerator::LabelValue(first.model());
    }
    return report;
  }

  std::map<std::string, std::string> VisibleDevicesEnv(
      const std::vector<uint32_t>& indexes) const override {
    std::string list;
    for (uint32_t i : indexes) list += (list.empty() ? "" : ",") + std::to_string(i);
    return {{"ROCR_VISIBLE_DEVICES", list}};
  }
};

}  // namespace

std::unique_ptr<AcceleratorPlugin> MakeAmdAcceleratorPlugin() {
  return std::make_unique<AmdPlugin>();
}

}  // namespace trainlet
