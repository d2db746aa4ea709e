// Accelerator plugins: nvidia and amd from hwloc fixtures plus a fake sysfs tree; NVML absent
// (health "unknown") and present (a fake libnvidia-ml with XID and ECC faults); the Apple parsers
// from captured macOS outputs; the built-in table and the node-level summary.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "agent/topology.h"
#include "plugins/accelerator/apple/apple_silicon.h"
#include "plugins/accelerator/label_value.h"
#include "trainlet/accelerator_plugin.h"

namespace trainlet {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

const std::string kFixtures = std::string(TRAINLET_SOURCE_DIR) + "/tests/fixtures/";

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

v1::Topology Load(const std::string& name) {
  auto t = agent::DiscoverTopology(kFixtures + name);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return t.ok() ? *t : v1::Topology();
}

std::unique_ptr<AcceleratorPlugin> Plugin(std::string_view name) {
  for (auto& p : MakeAcceleratorPlugins()) {
    if (p->name() == name) return std::move(p);
  }
  return nullptr;
}

AcceleratorEnv Offline() {
  AcceleratorEnv env;
  env.sysfs_root.clear();
  env.nvml_library.clear();
  env.apple_live = false;
  return env;
}

class TempTree {
 public:
  TempTree() {
    std::string pattern = ::testing::TempDir() + "trainlet-accel-XXXXXX";
    EXPECT_NE(::mkdtemp(pattern.data()), nullptr);
    root_ = pattern;
  }
  ~TempTree() {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
  void Write(const std::string& rel, const std::string& content) {
    fs::create_directories(fs::path(root_ + "/" + rel).parent_path());
    std::ofstream(root_ + "/" + rel) << content;
  }
  const std::string& root() const { return root_; }

 private:
  std::string root_;
};

TEST(AcceleratorRegistry, TableOrder) {
  EXPECT_THAT(AcceleratorPluginNames(), ElementsAre("nvidia", "amd", "apple"));
  auto plugins = MakeAcceleratorPlugins();
  ASSERT_EQ(plugins.size(), 3u);
  EXPECT_EQ(plugins[0]->resource_name(), "nvidia.com/gpu");
  EXPECT_EQ(plugins[1]->resource_name(), "amd.com/gpu");
  EXPECT_EQ(plugins[2]->resource_name(), "apple.com/gpu");
}

TEST(NvidiaPlugin, DgxWithoutNvmlSaysUnknown) {
  auto nvidia = Plugin("nvidia");
  AcceleratorEnv env = Offline();
  env.nvml_library = "/nonexistent/libnvidia-ml.so.1";  // tried and absent
  auto report = nvidia->Discover(Load("dgx-2socket-8gpu.xml"), env);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  ASSERT_EQ(report->accelerators.size(), 8u);
  const std::vector<std::string> buses = {"0000:18:00.0", "0000:29:00.0", "0000:3a:00.0",
                                          "0000:4b:00.0", "0000:98:00.0", "0000:a9:00.0",
                                          "0000:ba:00.0", "0000:cb:00.0"};
  for (uint32_t i = 0; i < 8; ++i) {
    const v1::Accelerator& a = report->accelerators[i];
    EXPECT_EQ(a.index(), i);
    EXPECT_EQ(a.vendor(), "nvidia");
    EXPECT_EQ(a.pci_bus_id(), buses[i]);
    EXPECT_EQ(a.numa_node(), i < 4 ? 0 : 1);
    EXPECT_EQ(a.local_cpuset(), i < 4 ? "0-55,112-167" : "56-111,168-223");
    EXPECT_EQ(a.health(), "unknown");
    EXPECT_EQ(a.uuid(), "");
    EXPECT_EQ(a.model(), "GH100 [H100 SXM5 80GB]");
  }
  EXPECT_THAT(report->notes, ElementsAre(HasSubstr("cannot load /nonexistent/libnvidia-ml.so.1")));
  EXPECT_EQ(report->labels.at("nvidia.com/gpu.present"), "true");
  EXPECT_EQ(report->labels.at("nvidia.com/gpu.count"), "8");
  EXPECT_EQ(report->labels.at("trainlet.io/gpu-model"), "GH100-H100-SXM5-80GB");
  EXPECT_EQ(nvidia->VisibleDevicesEnv({2, 3}).at("CUDA_VISIBLE_DEVICES"), "2,3");
  EXPECT_EQ(nvidia->VisibleDevicesEnv({2}).at("CUDA_DEVICE_ORDER"), "PCI_BUS_ID");
}

TEST(NvidiaPlugin, SysfsOverridesHwlocLocality) {
  TempTree sys;
  sys.Write("bus/pci/devices/0000:18:00.0/numa_node", "1\n");
  sys.Write("bus/pci/devices/0000:18:00.0/local_cpulist", "56-111,168-223\n");
  sys.Write("bus/pci/devices/0000:29:00.0/numa_node", "-1\n");
  AcceleratorEnv env = Offline();
  env.sysfs_root = sys.root();
  auto report = Plugin("nvidia")->Discover(Load("dgx-2socket-8gpu.xml"), env);
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(report->accelerators[0].numa_node(), 1);
  EXPECT_EQ(report->accelerators[0].local_cpuset(), "56-111,168-223");
  EXPECT_EQ(report->accelerators[1].numa_node(), -1);  // the kernel knows no NUMA node for it
  EXPECT_EQ(report->accelerators[2].numa_node(), 0);   // no sysfs entry: hwloc's value
}

TEST(NvidiaPlugin, NoNvidiaGpusFindsNothing) {
  for (const char* f : {"laptop-1socket.xml", "cpu-2socket.xml", "amd-2socket-8gpu.xml"}) {
    auto report = Plugin("nvidia")->Discover(Load(f), Offline());
    ASSERT_TRUE(report.ok());
    EXPECT_TRUE(report->accelerators.empty()) << f;
    EXPECT_TRUE(report->labels.empty()) << f;
  }
}

class FakeNvml : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("FAKE_NVML_DEVICES",
           "0000:18:00.0,0000:29:00.0,0000:3a:00.0,0000:4b:00.0,0000:98:00.0,0000:a9:00.0,"
           "0000:ba:00.0,0000:cb:00.0",
           1);
  }
  void TearDown() override {
    for (const char* v :
         {"FAKE_NVML_DEVICES", "FAKE_NVML_XID", "FAKE_NVML_DBE", "FAKE_NVML_INIT_FAILS"}) {
      unsetenv(v);
    }
  }
  AcceleratorEnv Env() {
    AcceleratorEnv env = Offline();
    env.nvml_library = FAKE_NVML_PATH;
    return env;
  }
};

TEST_F(FakeNvml, AddsUuidModelMemoryAndHealth) {
  auto nvidia = Plugin("nvidia");
  auto report = nvidia->Discover(Load("dgx-2socket-8gpu.xml"), Env());
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  ASSERT_EQ(report->accelerators.size(), 8u);
  EXPECT_EQ(report->accelerators[3].uuid(), "GPU-fake-03");
  EXPECT_EQ(report->accelerators[3].model(), "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(report->accelerators[3].memory_bytes(), 85520809984u);
  for (const auto& a : report->accelerators) EXPECT_EQ(a.health(), "ok");
  EXPECT_EQ(report->labels.at("nvidia.com/gpu.product"), "NVIDIA-H100-80GB-HBM3");
  EXPECT_EQ(report->labels.at("nvidia.com/gpu.memory"), "81559");
}

TEST_F(FakeNvml, FatalXidMakesOneGpuUnhealthyAndStaysSo) {
  setenv("FAKE_NVML_XID", "5:79", 1);  // fell off the bus
  auto nvidia = Plugin("nvidia");
  auto report = nvidia->Discover(Load("dgx-2socket-8gpu.xml"), Env());
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(report->accelerators[5].health(), "unhealthy: XID 79");
  EXPECT_EQ(report->accelerators[4].health(), "ok");
  nvidia->RefreshHealth(&report->accelerators);  // no new event: still unhealthy
  EXPECT_EQ(report->accelerators[5].health(), "unhealthy: XID 79");
}

TEST_F(FakeNvml, ApplicationXidIsNotAFault) {
  setenv("FAKE_NVML_XID", "2:13", 1);  // graphics engine exception: the program's fault
  auto report = Plugin("nvidia")->Discover(Load("dgx-2socket-8gpu.xml"), Env());
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(report->accelerators[2].health(), "ok");
}

TEST_F(FakeNvml, DoubleBitEccMakesUnhealthyAndNodeAllocatableDropsIt) {
  setenv("FAKE_NVML_DBE", "0:3", 1);
  AcceleratorEnv env = Env();
  const v1::Topology topo = Load("dgx-2socket-8gpu.xml");
  NodeAccelerators node = DiscoverNodeAccelerators(MakeAcceleratorPlugins(), topo, env);
  ASSERT_EQ(node.accelerators.size(), 8u);
  EXPECT_EQ(node.accelerators[0].health(), "unhealthy: 3 double-bit ECC errors");
  EXPECT_EQ(node.allocatable.at("nvidia.com/gpu"), 7);
  EXPECT_EQ(node.allocatable.at("cpu"), 224);
  EXPECT_EQ(node.allocatable.at("memory"), 1081649278976 + 1082321997824);
  EXPECT_FALSE(node.allocatable.contains("amd.com/gpu"));
}

TEST_F(FakeNvml, InitFailureFallsBackToUnknown) {
  setenv("FAKE_NVML_INIT_FAILS", "1", 1);
  auto report = Plugin("nvidia")->Discover(Load("dgx-2socket-8gpu.xml"), Env());
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(report->accelerators[0].health(), "unknown");
  EXPECT_THAT(report->notes, ElementsAre(HasSubstr("Driver Not Loaded")));
}

TEST(AmdPlugin, Mi300xFromFixtureAndSysfs) {
  TempTree sys;
  sys.Write("bus/pci/devices/0000:05:00.0/mem_info_vram_total", "206141652992\n");
  sys.Write("bus/pci/devices/0000:05:00.0/unique_id", "5a3e1b2c00000000\n");
  sys.Write("bus/pci/devices/0000:26:00.0/mem_info_vram_total", "lots\n");
  AcceleratorEnv env = Offline();
  env.sysfs_root = sys.root();
  auto amd = Plugin("amd");
  auto report = amd->Discover(Load("amd-2socket-8gpu.xml"), env);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  ASSERT_EQ(report->accelerators.size(), 8u);
  const v1::Accelerator& a = report->accelerators[0];
  EXPECT_EQ(a.vendor(), "amd");
  EXPECT_EQ(a.pci_bus_id(), "0000:05:00.0");
  EXPECT_EQ(a.memory_bytes(), 206141652992u);
  EXPECT_EQ(a.uuid(), "GPU-5a3e1b2c00000000");
  EXPECT_EQ(a.health(), "unknown");
  EXPECT_EQ(a.numa_node(), 0);
  EXPECT_EQ(report->accelerators[7].pci_bus_id(), "0000:e5:00.0");
  EXPECT_EQ(report->accelerators[7].numa_node(), 1);
  EXPECT_EQ(report->accelerators[7].local_cpuset(), "96-191,288-383");
  EXPECT_EQ(report->accelerators[1].memory_bytes(), 0u);
  EXPECT_THAT(report->notes, ::testing::Contains(HasSubstr("mem_info_vram_total is not a number")));
  EXPECT_EQ(report->labels.at("amd.com/gpu.device-id"), "74a1");
  EXPECT_EQ(report->labels.at("trainlet.io/gpu-model"), "Aqua-Vanjaram-Instinct-MI300X");
  auto env_vars = amd->VisibleDevicesEnv({6});
  EXPECT_EQ(env_vars.at("ROCR_VISIBLE_DEVICES"), "6");
  EXPECT_FALSE(env_vars.contains("HIP_VISIBLE_DEVICES"));
}

TEST(ApplePlugin, ParsesM2UltraCaptures) {
  auto sysctl = accelerator::ParseAppleSysctl(ReadFile(kFixtures + "macos/m2-ultra-sysctl.txt"),
                                              "m2-ultra-sysctl.txt");
  ASSERT_TRUE(sysctl.ok()) << sysctl.status().ToString();
  EXPECT_EQ(sysctl->brand, "Apple M2 Ultra");
  EXPECT_EQ(sysctl->performance_cores, 16u);
  EXPECT_EQ(sysctl->efficiency_cores, 8u);
  EXPECT_EQ(sysctl->memory_bytes, 206158430208u);
  auto gpu = accelerator::ParseAppleIoreg(ReadFile(kFixtures + "macos/m2-ultra-ioreg.txt"), "x");
  ASSERT_TRUE(gpu.ok()) << gpu.status().ToString();
  EXPECT_EQ(gpu->model, "Apple M2 Ultra");  // not the nested "model" of PerformanceStatistics
  EXPECT_EQ(gpu->gpu_cores, 76u);
  EXPECT_EQ(gpu->accelerators, 1u);
}

TEST(ApplePlugin, M4ProThroughThePlugin) {
  AcceleratorEnv env = Offline();
  env.apple_sysctl_text = ReadFile(kFixtures + "macos/m4-pro-sysctl.txt");
  env.apple_ioreg_text = ReadFile(kFixtures + "macos/m4-pro-ioreg.txt");
  auto plugins = MakeAcceleratorPlugins();
  NodeAccelerators node = DiscoverNodeAccelerators(plugins, v1::Topology(), env);
  ASSERT_EQ(node.accelerators.size(), 1u);
  const v1::Accelerator& a = node.accelerators[0];
  EXPECT_EQ(a.vendor(), "apple");
  EXPECT_EQ(a.model(), "Apple M4 Pro");
  EXPECT_EQ(a.gpu_cores(), 20u);
  EXPECT_EQ(a.performance_cores(), 10u);
  EXPECT_EQ(a.efficiency_cores(), 4u);
  EXPECT_EQ(a.memory_bytes(), 51539607552u);
  EXPECT_EQ(a.health(), "unknown");
  EXPECT_EQ(a.pci_bus_id(), "");
  EXPECT_EQ(node.allocatable.at("apple.com/gpu"), 1);
  EXPECT_EQ(node.labels.at("trainlet.io/gpu-model"), "Apple-M4-Pro");
  EXPECT_TRUE(Plugin("apple")->VisibleDevicesEnv({0}).empty());
}

TEST(ApplePlugin, BadCapturesNameTheProblem) {
  auto missing = accelerator::ParseAppleSysctl("hw.memsize: 1\n", "s.txt");
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("s.txt: no machdep.cpu.brand_string"));
  auto bad = accelerator::ParseAppleSysctl("machdep.cpu.brand_string: Apple M1\nhw.memsize: 12x\n",
                                           "s.txt");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("hw.memsize: not a number: \"12x\""));
  auto gpu = accelerator::ParseAppleIoreg(
      "+-o AGXAcceleratorG13G  <class AGXAcceleratorG13G>\n    {\n      \"gpu-core-count\" = "
      "many\n    }\n",
      "i.txt");
  ASSERT_FALSE(gpu.ok());
  EXPECT_THAT(gpu.status().message(), HasSubstr("i.txt: gpu-core-count"));
  // A plugin error is a note of the node discovery, never a failure of it.
  AcceleratorEnv env = Offline();
  env.apple_sysctl_text = "nothing useful\n";
  NodeAccelerators node = DiscoverNodeAccelerators(MakeAcceleratorPlugins(), v1::Topology(), env);
  EXPECT_TRUE(node.accelerators.empty());
  EXPECT_THAT(node.notes, ElementsAre(HasSubstr("apple: ")));
}

TEST(ApplePlugin, IntelMacAndLinuxFindNothing) {
  AcceleratorEnv env = Offline();
  env.apple_sysctl_text =
      "machdep.cpu.brand_string: Intel(R) Core(TM) i9-9880H CPU @ 2.30GHz\nhw.memsize: 1\n";
  auto report = Plugin("apple")->Discover(v1::Topology(), env);
  ASSERT_TRUE(report.ok());
  EXPECT_TRUE(report->accelerators.empty());
#if !defined(__APPLE__)
  AcceleratorEnv live;  // on Linux the Darwin calls are absent: nothing, no error
  report = Plugin("apple")->Discover(v1::Topology(), live);
  ASSERT_TRUE(report.ok());
  EXPECT_TRUE(report->accelerators.empty());
#endif
}

TEST(LabelValue, KubernetesRules) {
  EXPECT_EQ(accelerator::LabelValue("NVIDIA H100 80GB HBM3"), "NVIDIA-H100-80GB-HBM3");
  EXPECT_EQ(accelerator::LabelValue("  (weird) name!! "), "weird-name");
  EXPECT_EQ(accelerator::LabelValue(std::string(100, 'a')).size(), 63u);
  EXPECT_EQ(accelerator::LabelValue(""), "");
}

}  // namespace
}  // namespace trainlet
