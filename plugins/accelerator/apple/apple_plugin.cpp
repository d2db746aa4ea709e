#include "plugins/accelerator/apple/apple_plugin.h"

#include "plugins/accelerator/apple/apple_silicon.h"
#include "plugins/accelerator/label_value.h"
#include "plugins/plugin_status.h"

namespace trainlet {
namespace {

class ApplePlugin final : public AcceleratorPlugin {
 public:
  std::string_view name() const override { return "apple"; }
  std::string_view resource_name() const override { return "apple.com/gpu"; }

  PluginResult<AcceleratorReport> Discover(const v1::Topology& topology,
                                           const AcceleratorEnv& env) override {
    return ToPluginResult(DiscoverChip(topology, env));
  }

  std::map<std::string, std::string> VisibleDevicesEnv(
      const std::vector<uint32_t>& indexes) const override {
    (void)indexes;
    return {};
  }

 private:
  // Discover, in trainlet's own Result (its parsers return one).
  static Result<AcceleratorReport> DiscoverChip(const v1::Topology& topology,
                                                const AcceleratorEnv& env) {
    (void)topology;  // hwloc sees no PCI GPU on Apple Silicon
    AcceleratorReport report;
    std::string sysctl_text = env.apple_sysctl_text;
    std::string ioreg_text = env.apple_ioreg_text;
    std::string sysctl_source = "captured sysctl output", ioreg_source = "captured ioreg output";
    if (sysctl_text.empty()) {
      if (!env.apple_live) return report;
      auto live = accelerator::ReadDarwinSysctlText();
      if (!live.ok()) return report;  // not a Mac: nothing to find
      sysctl_text = std::move(*live);
      sysctl_source = "sysctl";
      if (ioreg_text.empty()) {
        auto ioreg = accelerator::ReadDarwinIoregText();
        if (ioreg.ok()) {
          ioreg_text = std::move(*ioreg);
        } else {
          report.notes.push_back("apple: " + ioreg.status().message());
        }
        ioreg_source = "ioreg -rc AGXAccelerator";
      }
    }
    TRAINLET_ASSIGN_OR_RETURN(accelerator::AppleSysctl chip,
                              accelerator::ParseAppleSysctl(sysctl_text, sysctl_source));
    if (!accelerator::IsAppleSilicon(chip)) return report;  // an Intel Mac
    TRAINLET_ASSIGN_OR_RETURN(accelerator::AppleGpu gpu,
                              accelerator::ParseAppleIoreg(ioreg_text, ioreg_source));
    v1::Accelerator a;
    a.set_vendor("apple");
    a.set_model(gpu.model.empty() ? chip.brand : gpu.model);
    a.set_memory_bytes(chip.memory_bytes);
    a.set_numa_node(-1);
    a.set_health("unknown");
    a.set_index(0);
    a.set_gpu_cores(gpu.gpu_cores);
    a.set_performance_cores(chip.performance_cores);
    a.set_efficiency_cores(chip.efficiency_cores);
    if (gpu.gpu_cores == 0) report.notes.push_back("apple: GPU core count unknown (no ioreg)");
    report.labels["trainlet.io/gpu-vendor"] = "apple";
    report.labels["trainlet.io/gpu-model"] = accelerator::LabelValue(a.model());
    report.labels["apple.com/gpu.present"] = "true";
    if (gpu.gpu_cores != 0) report.labels["apple.com/gpu.cores"] = std::to_string(gpu.gpu_cores);
    report.accelerators.push_back(std::move(a));
    return report;
  }
};

}  // namespace

std::unique_ptr<AcceleratorPlugin> MakeAppleAcceleratorPlugin() {
  return std::make_unique<ApplePlugin>();
}

}  // namespace trainlet
