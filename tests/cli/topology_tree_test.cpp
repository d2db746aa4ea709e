// Packages in the discovered topology (NumaNode.package, PciDevice.package, cpu_packages) from the
// hwloc XML fixtures, the `describe node` tree and conditions rendered from them, and an agent's
// hardware taken from the captured macOS fixtures (--apple-fixture).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "agent/topology.h"
#include "trainlet/accelerator_plugin.h"
#include "trainletctl/describe_node.h"

namespace trainlet {
namespace {

std::string Fixture(const std::string& name) {
  return std::string(TRAINLET_SOURCE_DIR) + "/tests/fixtures/" + name;
}

v1::Topology Load(const std::string& name) {
  auto t = agent::DiscoverTopology(Fixture(name));
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return t.ok() ? *t : v1::Topology{};
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// Index of the first line at or after `from` that starts with `prefix`, -1 when none.
int Find(const std::vector<std::string>& lines, const std::string& prefix, int from = 0) {
  for (int i = from; i < static_cast<int>(lines.size()); ++i) {
    if (lines[i].rfind(prefix, 0) == 0) return i;
  }
  return -1;
}

TEST(TopologyPackages, DgxHasTwoPackagesEachWithItsNumaNodeAndFourGpus) {
  const v1::Topology t = Load("dgx-2socket-8gpu.xml");
  ASSERT_EQ(t.cpu_packages_size(), 2);
  for (int p = 0; p < 2; ++p) {
    const v1::CpuPackage& pkg = t.cpu_packages(p);
    EXPECT_EQ(pkg.os_index(), static_cast<uint32_t>(p));
    EXPECT_EQ(pkg.cores(), 56u);
    EXPECT_EQ(pkg.pus(), 112u);
    EXPECT_EQ(pkg.cpuset(), t.numa_nodes(p).cpuset());
    EXPECT_EQ(pkg.memory_bytes(), t.numa_nodes(p).memory_bytes());
    EXPECT_NE(pkg.cpu_model().find("Xeon"), std::string::npos) << pkg.cpu_model();
    EXPECT_EQ(t.numa_nodes(p).package(), p);
  }
  ASSERT_EQ(t.gpus_size(), 8);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(t.gpus(i).package(), i < 4 ? 0 : 1) << i;
  for (const auto& nic : t.nics()) EXPECT_EQ(nic.package(), nic.numa_node()) << nic.pci_bus_id();
}

TEST(TopologyPackages, EveryFixtureMapsEachNumaNodeToAPackage) {
  for (const char* name :
       {"amd-2socket-8gpu.xml", "cpu-2socket.xml", "laptop-1socket.xml", "dgx-2socket-8gpu.xml"}) {
    const v1::Topology t = Load(name);
    ASSERT_EQ(static_cast<uint32_t>(t.cpu_packages_size()), t.packages()) << name;
    uint64_t memory = 0;
    uint32_t pus = 0;
    for (const auto& p : t.cpu_packages()) {
      memory += p.memory_bytes();
      pus += p.pus();
    }
    EXPECT_EQ(memory, t.memory_bytes()) << name;
    EXPECT_EQ(pus, t.pus()) << name;
    for (const auto& n : t.numa_nodes()) EXPECT_GE(n.package(), 0) << name;
  }
  const v1::Topology cpu = Load("cpu-2socket.xml");
  ASSERT_FALSE(cpu.nics().empty());
  EXPECT_EQ(cpu.nics(0).package(), 1);  // the E810 sits on package 1
}

TEST(TopologyTree, DgxTreeShowsPackagesThenNumaThenDevices) {
  v1::NodeInfo info;
  *info.mutable_topology() = Load("dgx-2socket-8gpu.xml");
  const std::string tree = cli::TopologyTree(info);
  const auto lines = Lines(tree);
  SCOPED_TRACE(tree);
  ASSERT_EQ(Find(lines, "  Machine: 2 packages, 112 cores, 224 PUs, "), 0);
  const int p0 = Find(lines, "  ├─ Package 0: ");
  const int p1 = Find(lines, "  └─ Package 1: ");
  ASSERT_GT(p0, 0);
  ASSERT_GT(p1, p0);
  EXPECT_NE(lines[p0].find("56 cores, 112 PUs (CPUs 0-55,112-167), 1007Gi"), std::string::npos);
  EXPECT_EQ(Find(lines, "  │  └─ NUMA 0: 1007Gi, CPUs 0-55,112-167"), p0 + 1);
  EXPECT_EQ(Find(lines, "     └─ NUMA 1: "), p1 + 1);
  // GPUs 18, 29, 3a, 4b under NUMA 0 (package 0), 98.. under NUMA 1 (package 1).
  for (const char* bus : {"18", "29", "3a", "4b"}) {
    const int at = Find(lines, "  │     ├─ GPU 0000:" + std::string(bus) + ":00.0 nvidia");
    EXPECT_GT(at, p0 + 1) << bus;
    EXPECT_LT(at, p1) << bus;
  }
  for (const char* bus : {"98", "a9", "ba", "cb"}) {
    EXPECT_GT(Find(lines, "        ├─ GPU 0000:" + std::string(bus) + ":00.0 nvidia"), p1 + 1)
        << bus;
  }
  EXPECT_GT(Find(lines, "        └─ NIC "), p1);  // the last leaf of the last branch
  // Nothing is left outside a package on this machine.
  EXPECT_EQ(tree.find("not local"), std::string::npos);
}

TEST(TopologyTree, WithoutPackagesTheTreeStartsAtNuma) {
  v1::NodeInfo info;
  *info.mutable_topology() = Load("cpu-2socket.xml");
  info.mutable_topology()->clear_cpu_packages();  // as an older agent sends it
  const auto lines = Lines(cli::TopologyTree(info));
  EXPECT_EQ(Find(lines, "  ├─ NUMA 0: "), 1);
  EXPECT_GT(Find(lines, "  └─ NUMA 1: "), 1);
  EXPECT_EQ(Find(lines, "  ├─ Package"), -1);
}

TEST(TopologyTree, DeviceLocalToAPackageButNotOneNumaNodeHangsUnderThePackage) {
  v1::NodeInfo info;
  v1::Topology& t = *info.mutable_topology();
  t.set_packages(1);
  auto* pkg = t.add_cpu_packages();
  pkg->set_os_index(0);
  pkg->set_cores(8);
  pkg->set_pus(8);
  for (int i = 0; i < 2; ++i) {
    auto* n = t.add_numa_nodes();
    n->set_os_index(i);
    n->set_cpuset(i == 0 ? "0-3" : "4-7");
    n->set_package(0);
  }
  auto* gpu = t.add_gpus();
  gpu->set_device_class(v1::PciDevice::CLASS_GPU);
  gpu->set_pci_bus_id("0000:41:00.0");
  gpu->set_numa_node(-1);
  gpu->set_package(0);
  auto* nic = t.add_nics();
  nic->set_device_class(v1::PciDevice::CLASS_NIC);
  nic->set_pci_bus_id("0000:c1:00.0");
  nic->set_numa_node(-1);
  nic->set_package(-1);
  const std::string tree = cli::TopologyTree(info);
  const auto lines = Lines(tree);
  SCOPED_TRACE(tree);
  EXPECT_EQ(Find(lines, "  ├─ Package 0: 8 cores, 8 PUs"), 1);
  EXPECT_EQ(Find(lines, "  │  ├─ NUMA 0: "), 2);
  EXPECT_EQ(Find(lines, "  │  ├─ NUMA 1: "), 3);
  EXPECT_EQ(Find(lines, "  │  └─ GPU 0000:41:00.0"), 4);
  EXPECT_EQ(Find(lines, "  └─ not local to one package"), 5);
  EXPECT_EQ(Find(lines, "     └─ NIC 0000:c1:00.0"), 6);
}

TEST(NodeConditions, OneRowPerConditionWithReasonAndMessage) {
  v1::NodeStatus n;
  auto add = [&](const char* type, const char* status, const char* reason, const char* msg) {
    auto* c = n.add_conditions();
    c->set_type(type);
    c->set_status(status);
    c->set_reason(reason);
    c->set_message(msg);
  };
  add("Ready", "True", "Ready", "");
  add("Healthy", "False", "HealthCheckFailed", "disk: 3 MiB free");
  add("SchedulingDisabled", "True", "Cordoned", "swap PSU");
  const auto lines = Lines(cli::NodeConditions(n, 0));
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[0].rfind("  TYPE ", 0), 0u);
  EXPECT_EQ(lines[1].rfind("  Ready ", 0), 0u);
  EXPECT_NE(lines[2].find("False"), std::string::npos);
  EXPECT_NE(lines[2].find("HealthCheckFailed"), std::string::npos);
  EXPECT_NE(lines[2].find("disk: 3 MiB free"), std::string::npos);
  EXPECT_NE(lines[3].find("Cordoned"), std::string::npos);
  EXPECT_NE(lines[3].find("swap PSU"), std::string::npos);
  EXPECT_EQ(cli::NodeConditions(v1::NodeStatus{}, 0), "  <none>\n");
}

TEST(AppleFixture, M2UltraAgentReportsTheChip) {
  auto hw = agent::DiscoverNodeHardware("", Fixture("macos/m2-ultra"));
  ASSERT_TRUE(hw.ok()) << hw.status().ToString();
  const v1::Topology& t = hw->topology;
  EXPECT_EQ(t.source(), "apple-fixture:" + Fixture("macos/m2-ultra"));
  EXPECT_EQ(t.cpu_model(), "Apple M2 Ultra");
  EXPECT_EQ(t.packages(), 1u);
  EXPECT_EQ(t.cores(), 24u);
  EXPECT_EQ(t.pus(), 24u);
  EXPECT_EQ(t.memory_bytes(), 206158430208u);
  ASSERT_EQ(t.numa_nodes_size(), 1);
  EXPECT_EQ(t.numa_nodes(0).cpuset(), "0-23");
  ASSERT_EQ(t.cpu_packages_size(), 1);
  EXPECT_EQ(t.gpus_size(), 0);
  EXPECT_FALSE(hw->accelerator_env.apple_live);
  EXPECT_TRUE(hw->accelerator_env.sysfs_root.empty());
  EXPECT_TRUE(hw->accelerator_env.nvml_library.empty());

  auto plugins = MakeAcceleratorPlugins();
  const NodeAccelerators found = DiscoverNodeAccelerators(plugins, t, hw->accelerator_env);
  ASSERT_EQ(found.accelerators.size(), 1u);
  const v1::Accelerator& a = found.accelerators[0];
  EXPECT_EQ(a.vendor(), "apple");
  EXPECT_EQ(a.model(), "Apple M2 Ultra");
  EXPECT_EQ(a.gpu_cores(), 76u);
  EXPECT_EQ(a.performance_cores(), 16u);
  EXPECT_EQ(a.efficiency_cores(), 8u);
  EXPECT_EQ(a.memory_bytes(), 206158430208u);
  EXPECT_EQ(found.allocatable.at("apple.com/gpu"), 1);
  EXPECT_EQ(found.allocatable.at("cpu"), 24);
  EXPECT_EQ(found.labels.at("trainlet.io/gpu-model"), "Apple-M2-Ultra");
}

TEST(AppleFixture, M4ProWithAnXmlTopologyKeepsTheXml) {
  auto hw = agent::DiscoverNodeHardware(Fixture("laptop-1socket.xml"), Fixture("macos/m4-pro"));
  ASSERT_TRUE(hw.ok()) << hw.status().ToString();
  EXPECT_EQ(hw->topology.source(), "xml:" + Fixture("laptop-1socket.xml"));
  EXPECT_EQ(hw->accelerator_env.apple_sysctl_text.find("hw.memsize: 51539607552"),
            hw->accelerator_env.apple_sysctl_text.find("hw.memsize"));
}

TEST(AppleFixture, MissingOrBrokenCaptureNamesTheFile) {
  auto missing = agent::DiscoverNodeHardware("", Fixture("macos/m9-nothing"));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), ErrorCode::kNotFound);
  EXPECT_NE(missing.status().message().find("--apple-fixture: "), std::string::npos);
  EXPECT_NE(missing.status().message().find("m9-nothing-sysctl.txt"), std::string::npos);

  // An hwloc XML is no sysctl capture: "<prefix>-sysctl.txt" must hold the brand string.
  char dir[] = "/tmp/trainlet-apple-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string prefix = std::string(dir) + "/intel";
  {
    std::ofstream(prefix + "-sysctl.txt") << "machdep.cpu.brand_string: Intel(R) Core(TM) i9\n"
                                          << "hw.memsize: 1024\n";
    std::ofstream(prefix + "-ioreg.txt") << "";
  }
  auto intel = agent::DiscoverNodeHardware("", prefix);
  ASSERT_FALSE(intel.ok());
  EXPECT_EQ(intel.status().code(), ErrorCode::kInvalid);
  EXPECT_NE(intel.status().message().find("not an Apple Silicon chip"), std::string::npos);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace trainlet
