#include "agent/topology.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace trainlet::agent {
namespace {

namespace fs = std::filesystem;

std::string Fixture(const std::string& name) {
  return std::string(TRAINLET_SOURCE_DIR) + "/tests/fixtures/" + name;
}

std::vector<std::string> OsDevices(const v1::PciDevice& dev) {
  return {dev.os_devices().begin(), dev.os_devices().end()};
}

// A temp dir removed when the test ends.
class TempDir {
 public:
  TempDir() {
    std::string templ = (fs::temp_directory_path() / "trainlet-topology-XXXXXX").string();
    TRAINLET_CHECK(mkdtemp(templ.data()) != nullptr);
    path_ = templ;
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string Write(const std::string& name, const std::string& text) const {
    const std::string path = (path_ / name).string();
    std::ofstream(path) << text;
    return path;
  }

 private:
  fs::path path_;
};

class DgxFixtureTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Result<v1::Topology> t = DiscoverTopology(path_);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    topo_ = std::move(t).value();
  }
  const std::string path_ = Fixture("dgx-2socket-8gpu.xml");
  v1::Topology topo_;
};

TEST_F(DgxFixtureTest, CpusAndMemory) {
  EXPECT_EQ(topo_.source(), "xml:" + path_);
  EXPECT_EQ(topo_.packages(), 2u);
  EXPECT_EQ(topo_.cores(), 112u);
  EXPECT_EQ(topo_.pus(), 224u);
  EXPECT_EQ(topo_.cpu_model(), "Intel(R) Xeon(R) Platinum 8480C");
  ASSERT_EQ(topo_.numa_nodes_size(), 2);
  EXPECT_EQ(topo_.numa_nodes(0).os_index(), 0u);
  EXPECT_EQ(topo_.numa_nodes(0).memory_bytes(), 1081649278976u);
  // Linux numbers the second hyper-thread of every core after all first threads.
  EXPECT_EQ(topo_.numa_nodes(0).cpuset(), "0-55,112-167");
  EXPECT_EQ(topo_.numa_nodes(1).os_index(), 1u);
  EXPECT_EQ(topo_.numa_nodes(1).memory_bytes(), 1082321997824u);
  EXPECT_EQ(topo_.numa_nodes(1).cpuset(), "56-111,168-223");
  EXPECT_EQ(topo_.memory_bytes(), 1081649278976u + 1082321997824u);
}

TEST_F(DgxFixtureTest, EightNvidiaGpusFourPerSocket) {
  // Not GPUs: the BMC's ASPEED VGA (only DRM nodes) and the NVSwitches (NVIDIA, class 0x0680).
  ASSERT_EQ(topo_.gpus_size(), 8);
  const std::vector<std::string> bus_ids = {"0000:18:00.0", "0000:29:00.0", "0000:3a:00.0",
                                            "0000:4b:00.0", "0000:98:00.0", "0000:a9:00.0",
                                            "0000:ba:00.0", "0000:cb:00.0"};
  for (int i = 0; i < 8; ++i) {
    SCOPED_TRACE("gpu " + std::to_string(i));
    const v1::PciDevice& gpu = topo_.gpus(i);
    const int node = i < 4 ? 0 : 1;
    EXPECT_EQ(gpu.device_class(), v1::PciDevice::CLASS_GPU);
    EXPECT_EQ(gpu.pci_bus_id(), bus_ids[i]);
    EXPECT_EQ(gpu.vendor(), "nvidia");
    EXPECT_EQ(gpu.vendor_id(), 0x10deu);
    EXPECT_EQ(gpu.device_id(), 0x2330u);
    EXPECT_EQ(gpu.name(), "GH100 [H100 SXM5 80GB]");
    EXPECT_EQ(gpu.numa_node(), node);
    EXPECT_EQ(gpu.local_cpuset(), topo_.numa_nodes(node).cpuset());
    EXPECT_EQ(OsDevices(gpu),
              (std::vector<std::string>{"cuda" + std::to_string(i), "nvml" + std::to_string(i)}));
  }
}

TEST_F(DgxFixtureTest, InfinibandAndEthernetNics) {
  ASSERT_EQ(topo_.nics_size(), 10);
  const std::vector<std::string> ib_names = {"ibp25s0",  "ibp42s0",  "ibp59s0",  "ibp76s0",
                                             "ibp153s0", "ibp170s0", "ibp187s0", "ibp204s0"};
  for (int i = 0; i < 10; ++i) {
    SCOPED_TRACE("nic " + std::to_string(i));
    const v1::PciDevice& nic = topo_.nics(i);
    EXPECT_EQ(nic.device_class(), v1::PciDevice::CLASS_NIC);
    EXPECT_EQ(nic.vendor(), "mellanox");
    EXPECT_EQ(nic.vendor_id(), 0x15b3u);
    EXPECT_EQ(nic.name(), "MT2910 Family [ConnectX-7]");
    const std::string netdev =
        i < 8 ? ib_names[i] : "enp218s0f" + std::to_string(i - 8) + "np" + std::to_string(i - 8);
    EXPECT_EQ(OsDevices(nic), (std::vector<std::string>{netdev, "mlx5_" + std::to_string(i)}));
    const int node = (i < 4) ? 0 : 1;
    EXPECT_EQ(nic.numa_node(), node);
    EXPECT_EQ(nic.local_cpuset(), topo_.numa_nodes(node).cpuset());
  }
  EXPECT_EQ(topo_.nics(0).pci_bus_id(), "0000:19:00.0");
  EXPECT_EQ(topo_.nics(9).pci_bus_id(), "0000:da:00.1");
}

TEST_F(DgxFixtureTest, Summary) {
  EXPECT_EQ(SummarizeTopology(topo_),
            "2 packages, 112 cores, 224 PUs, 2 NUMA, 2015 GiB, 8 GPUs (nvidia), 10 NICs");
}

TEST(LaptopFixtureTest, Values) {
  const std::string path = Fixture("laptop-1socket.xml");
  Result<v1::Topology> r = DiscoverTopology(path);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const v1::Topology& t = *r;
  EXPECT_EQ(t.source(), "xml:" + path);
  EXPECT_EQ(t.packages(), 1u);
  EXPECT_EQ(t.cores(), 4u);
  EXPECT_EQ(t.pus(), 8u);
  EXPECT_EQ(t.memory_bytes(), uint64_t{16} << 30);
  EXPECT_EQ(t.cpu_model(), "Intel(R) Core(TM) i7-8550U CPU @ 1.80GHz");
  ASSERT_EQ(t.numa_nodes_size(), 1);
  EXPECT_EQ(t.numa_nodes(0).os_index(), 0u);
  EXPECT_EQ(t.numa_nodes(0).memory_bytes(), uint64_t{16} << 30);
  EXPECT_EQ(t.numa_nodes(0).cpuset(), "0-7");

  ASSERT_EQ(t.gpus_size(), 1);
  const v1::PciDevice& gpu = t.gpus(0);
  EXPECT_EQ(gpu.pci_bus_id(), "0000:00:02.0");
  EXPECT_EQ(gpu.vendor(), "intel");
  EXPECT_EQ(gpu.vendor_id(), 0x8086u);
  EXPECT_EQ(gpu.device_id(), 0x5917u);
  EXPECT_EQ(gpu.name(), "UHD Graphics 620");
  EXPECT_EQ(gpu.numa_node(), 0);
  EXPECT_EQ(gpu.local_cpuset(), "0-7");
  EXPECT_EQ(OsDevices(gpu), (std::vector<std::string>{"card0", "renderD128"}));

  ASSERT_EQ(t.nics_size(), 1);  // the Wi-Fi card; the NVMe disk is neither
  const v1::PciDevice& nic = t.nics(0);
  EXPECT_EQ(nic.pci_bus_id(), "0000:02:00.0");
  EXPECT_EQ(nic.vendor(), "intel");
  EXPECT_EQ(nic.device_id(), 0x24fdu);
  EXPECT_EQ(nic.numa_node(), 0);
  EXPECT_EQ(OsDevices(nic), std::vector<std::string>{"wlp2s0"});

  EXPECT_EQ(SummarizeTopology(t),
            "1 package, 4 cores, 8 PUs, 1 NUMA, 16 GiB, 1 GPU (intel), 1 NIC");
}

// Two packages, no CPU model; I/O attached to the whole machine (so no single NUMA node is
// local): a BMC VGA with only DRM nodes, an unknown vendor's accelerator that a compute backend
// (OpenCL) found, and an unknown vendor's NIC.
constexpr char kMachineLevelIoXml[] = R"(<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE topology SYSTEM "hwloc2.dtd">
<topology version="2.0">
  <object type="Machine" os_index="0" cpuset="0x00000003" complete_cpuset="0x00000003" allowed_cpuset="0x00000003" nodeset="0x00000003" complete_nodeset="0x00000003" allowed_nodeset="0x00000003" gp_index="1">
    <object type="Package" os_index="0" cpuset="0x00000001" complete_cpuset="0x00000001" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="2">
      <object type="NUMANode" os_index="0" cpuset="0x00000001" complete_cpuset="0x00000001" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="3" local_memory="1073741824"/>
      <object type="Core" os_index="0" cpuset="0x00000001" complete_cpuset="0x00000001" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="4">
        <object type="PU" os_index="0" cpuset="0x00000001" complete_cpuset="0x00000001" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="5"/>
      </object>
    </object>
    <object type="Package" os_index="1" cpuset="0x00000002" complete_cpuset="0x00000002" nodeset="0x00000002" complete_nodeset="0x00000002" gp_index="6">
      <object type="NUMANode" os_index="1" cpuset="0x00000002" complete_cpuset="0x00000002" nodeset="0x00000002" complete_nodeset="0x00000002" gp_index="7" local_memory="536870912"/>
      <object type="Core" os_index="0" cpuset="0x00000002" complete_cpuset="0x00000002" nodeset="0x00000002" complete_nodeset="0x00000002" gp_index="8">
        <object type="PU" os_index="1" cpuset="0x00000002" complete_cpuset="0x00000002" nodeset="0x00000002" complete_nodeset="0x00000002" gp_index="9"/>
      </object>
    </object>
    <object type="Bridge" gp_index="10" bridge_type="0-1" depth="0" bridge_pci="0000:[00-00]">
      <object type="PCIDev" gp_index="11" pci_busid="0000:00:01.0" pci_type="0300 [1a03:2000] [1a03:2000] 52" pci_link_speed="0.000000">
        <object type="OSDev" gp_index="12" name="card0" osdev_type="1"/>
      </object>
      <object type="PCIDev" gp_index="13" pci_busid="0000:00:02.0" pci_type="1200 [1ed5:0300] [1ed5:0300] 01" pci_link_speed="0.000000">
        <object type="OSDev" gp_index="14" name="opencl0d0" subtype="OpenCL" osdev_type="5">
          <info name="GPUModel" value="Example Accelerator X1"/>
        </object>
      </object>
      <object type="PCIDev" gp_index="15" pci_busid="0000:00:03.0" pci_type="0200 [1af4:1041] [1af4:1041] 01" pci_link_speed="0.000000">
        <object type="OSDev" gp_index="16" name="eth0" osdev_type="2"/>
      </object>
    </object>
  </object>
</topology>
)";

TEST(MachineLevelIoTest, NoSingleLocalNumaNodeAndGpuByBackend) {
  TempDir dir;
  Result<v1::Topology> r = DiscoverTopology(dir.Write("io.xml", kMachineLevelIoXml));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const v1::Topology& t = *r;
  EXPECT_EQ(t.packages(), 2u);
  EXPECT_EQ(t.cpu_model(), "");
  EXPECT_EQ(t.memory_bytes(), (uint64_t{3} << 29));
  ASSERT_EQ(t.gpus_size(), 1);
  EXPECT_EQ(t.gpus(0).pci_bus_id(), "0000:00:02.0");
  EXPECT_EQ(t.gpus(0).vendor(), "");
  EXPECT_EQ(t.gpus(0).name(), "Example Accelerator X1");  // no PCIDevice info: the backend's
  EXPECT_EQ(t.gpus(0).numa_node(), -1);
  EXPECT_EQ(t.gpus(0).local_cpuset(), "0-1");
  ASSERT_EQ(t.nics_size(), 1);
  EXPECT_EQ(t.nics(0).numa_node(), -1);
  EXPECT_EQ(OsDevices(t.nics(0)), std::vector<std::string>{"eth0"});
  EXPECT_EQ(SummarizeTopology(t), "2 packages, 2 cores, 2 PUs, 2 NUMA, 1 GiB, 1 GPU (?), 1 NIC");
}

TEST(TopologyErrorsTest, MissingFileNamesThePath) {
  TempDir dir;
  const std::string path = dir.Write("unused", "") + "-does-not-exist.xml";
  Result<v1::Topology> r = DiscoverTopology(path);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kNotFound);
  EXPECT_NE(r.status().message().find(path), std::string::npos) << r.status().message();
}

TEST(TopologyErrorsTest, GarbageFilesNameThePath) {
  TempDir dir;
  for (const char* text : {"this is not xml\n", "<?xml version=\"1.0\"?>\n<foo/>\n", "",
                           "<topology version=\"2.0\"><object type=\"Machine\">"}) {
    const std::string path = dir.Write("bad.xml", text);
    Result<v1::Topology> r = DiscoverTopology(path);
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_EQ(r.status().code(), ErrorCode::kInvalid) << r.status().ToString();
    EXPECT_NE(r.status().message().find(path), std::string::npos) << r.status().message();
  }
}

// hwloc itself swaps the live machine for HWLOC_XMLFILE; the result must not claim "hwloc".
TEST(LiveTopologyTest, HwlocXmlFileIsReportedAsTheSource) {
  const std::string path = Fixture("laptop-1socket.xml");
  ASSERT_EQ(setenv("HWLOC_XMLFILE", path.c_str(), 1), 0);
  Result<v1::Topology> r = DiscoverTopology("");
  ASSERT_EQ(unsetenv("HWLOC_XMLFILE"), 0);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->source(), "xml:" + path);
  EXPECT_EQ(r->pus(), 8u);
}

TEST(LiveTopologyTest, ThisMachine) {
  // hwloc would load this file instead of probing; the test wants the real machine.
  ASSERT_EQ(unsetenv("HWLOC_XMLFILE"), 0);
  Result<v1::Topology> r = DiscoverTopology("");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->source(), "hwloc");
  EXPECT_GE(r->pus(), 1u);
  EXPECT_GE(r->cores(), 1u);
  EXPECT_LE(r->cores(), r->pus());
  EXPECT_GT(r->memory_bytes(), 0u);
  ASSERT_GE(r->numa_nodes_size(), 1);
  EXPECT_FALSE(r->numa_nodes(0).cpuset().empty());
  EXPECT_FALSE(SummarizeTopology(*r).empty());
}

// The live machine is exported for trainlet-pmix (common/pmix/node_topology_xml.h): hwloc XML
// that hwloc loads back to the same machine. Another machine's XML is never exported.
TEST(LiveTopologyTest, ExportsTheLiveMachineOnly) {
  ASSERT_EQ(unsetenv("HWLOC_XMLFILE"), 0);
  std::string xml = "stale";
  Result<v1::Topology> live = DiscoverTopology("", &xml);
  ASSERT_TRUE(live.ok()) << live.status().ToString();
  EXPECT_NE(xml.find("<topology"), std::string::npos) << xml.substr(0, 200);
  TempDir dir;
  Result<v1::Topology> again = DiscoverTopology(dir.Write("live.xml", xml));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->pus(), live->pus());
  EXPECT_EQ(again->numa_nodes_size(), live->numa_nodes_size());

  Result<v1::Topology> other = DiscoverTopology(Fixture("laptop-1socket.xml"), &xml);
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  EXPECT_EQ(xml, "");
}

TEST(PublishTopologyXmlTest, WritesReadableFileAndRemovesIt) {
  TempDir dir;
  const std::string state = dir.Write("unused", "");
  const std::string state_dir = fs::path(state).parent_path().string();
  const std::string path = state_dir + "/topology.xml";
  ASSERT_TRUE(PublishTopologyXml(platform::RealEnv(), state_dir, "<topology/>").ok());
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "<topology/>");
  // Readable by a rank user, whom trainlet-step lets search the state dir.
  EXPECT_EQ(fs::status(path).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read |
                fs::perms::others_read);
  ASSERT_TRUE(PublishTopologyXml(platform::RealEnv(), state_dir, "").ok());
  EXPECT_FALSE(fs::exists(path));
  EXPECT_TRUE(PublishTopologyXml(platform::RealEnv(), state_dir, "").ok());  // already gone
}

}  // namespace
}  // namespace trainlet::agent
