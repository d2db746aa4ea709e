// The real hwloc export of a one-GPU NVIDIA H200 machine (tests/fixtures/h200-vm-1gpu.xml, taken
// with Debian's lstopo 2.9.0, which has no NVML or CUDA plugin, on a Firecracker VM with driver
// 580.159.04). What trainlet makes of it without NVML is what an agent reports on such a machine
// before NVML loads; with NVML the same agent also reported the model "NVIDIA H200", 140 GiB and
// the GPU's UUID (tests/fixtures/README.md).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "agent/topology.h"
#include "trainlet/accelerator_plugin.h"

namespace trainlet::agent {
namespace {

const std::string kPath = std::string(TRAINLET_SOURCE_DIR) + "/tests/fixtures/h200-vm-1gpu.xml";

v1::Topology LoadH200() {
  Result<v1::Topology> t = DiscoverTopology(kPath);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return t.ok() ? *t : v1::Topology();
}

TEST(H200FixtureTest, CpusAndMemory) {
  const v1::Topology t = LoadH200();
  EXPECT_EQ(t.source(), "xml:" + kPath);
  EXPECT_EQ(t.packages(), 1u);
  EXPECT_EQ(t.cores(), 16u);
  EXPECT_EQ(t.pus(), 16u);
  EXPECT_EQ(t.memory_bytes(), 4659331072u);
  EXPECT_EQ(t.cpu_model(), "Intel(R) Xeon(R) Processor");
  ASSERT_EQ(t.numa_nodes_size(), 1);
  EXPECT_EQ(t.numa_nodes(0).cpuset(), "0-15");
}

TEST(H200FixtureTest, TheGpuIsAPciDeviceWithoutOsDevices) {
  const v1::Topology t = LoadH200();
  ASSERT_EQ(t.gpus_size(), 1);
  const v1::PciDevice& gpu = t.gpus(0);
  EXPECT_EQ(gpu.pci_bus_id(), "0000:00:06.0");
  EXPECT_EQ(gpu.vendor(), "nvidia");
  EXPECT_EQ(gpu.vendor_id(), 0x10deu);
  EXPECT_EQ(gpu.device_id(), 0x2335u);
  EXPECT_TRUE(gpu.os_devices().empty());  // hwloc without NVML names no cudaN/nvmlN
  ASSERT_EQ(t.nics_size(), 1);
  EXPECT_EQ(t.nics(0).pci_bus_id(), "0000:00:03.0");
}

TEST(H200FixtureTest, NvidiaPluginFindsOneGpuWithoutNvml) {
  std::unique_ptr<AcceleratorPlugin> nvidia;
  for (auto& p : MakeAcceleratorPlugins()) {
    if (p->name() == "nvidia") nvidia = std::move(p);
  }
  ASSERT_NE(nvidia, nullptr);
  AcceleratorEnv offline;
  offline.sysfs_root.clear();
  offline.nvml_library.clear();
  offline.apple_live = false;
  auto report = nvidia->Discover(LoadH200(), offline);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  ASSERT_EQ(report->accelerators.size(), 1u);
  const v1::Accelerator& a = report->accelerators[0];
  EXPECT_EQ(a.index(), 0u);
  EXPECT_EQ(a.vendor(), "nvidia");
  EXPECT_EQ(a.pci_bus_id(), "0000:00:06.0");
  EXPECT_EQ(a.health(), "unknown");  // no NVML: nothing to say about its health
  EXPECT_EQ(a.local_cpuset(), "0-15");
  EXPECT_EQ(report->labels.at("nvidia.com/gpu.count"), "1");
  EXPECT_EQ(nvidia->VisibleDevicesEnv({0}).at("CUDA_VISIBLE_DEVICES"), "0");
}

}  // namespace
}  // namespace trainlet::agent
