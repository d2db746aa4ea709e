#include "agent/pmix/agent_topology.h"

#include <gtest/gtest.h>
#include <hwloc.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace trainlet::pmix {
namespace {

namespace fs = std::filesystem;

class AgentTopologyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string templ = (fs::temp_directory_path() / "trainlet-agent-topo-XXXXXX").string();
    ASSERT_NE(mkdtemp(templ.data()), nullptr);
    dir_ = templ;
  }
  void TearDown() override { fs::remove_all(dir_); }

  // This machine discovered as the agent discovers it, exported as the agent exports it.
  std::string ExportLiveMachine(int* pus) {
    hwloc_topology_t t = nullptr;
    EXPECT_EQ(hwloc_topology_init(&t), 0);
    hwloc_topology_set_io_types_filter(t, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    EXPECT_EQ(hwloc_topology_load(t), 0);
    *pus = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PU);
    const std::string path = dir_ + "/live.xml";
    EXPECT_EQ(hwloc_topology_export_xml(t, path.c_str(), 0), 0);
    hwloc_topology_destroy(t);
    return path;
  }

  std::string dir_;
};

TEST_F(AgentTopologyTest, LoadsTheAgentsExportAsThisMachine) {
  unsetenv("HWLOC_XMLFILE");
  int pus = 0;
  const std::string path = ExportLiveMachine(&pus);
  Result<AgentTopology> t = AgentTopology::Load(path);
  ASSERT_TRUE(t.ok()) << t.status().message();
  ASSERT_NE(t->get(), nullptr);
  // Binding through it acts on this machine, as through libpmix's own discovery.
  EXPECT_EQ(hwloc_topology_is_thissystem(t->get()), 1);
  EXPECT_EQ(hwloc_get_nbobjs_by_type(t->get(), HWLOC_OBJ_PU), pus);
  EXPECT_NE(hwloc_topology_get_allowed_cpuset(t->get()), nullptr);

  AgentTopology moved = std::move(t).value();  // the owner moves, the topology stays
  EXPECT_EQ(hwloc_get_nbobjs_by_type(moved.get(), HWLOC_OBJ_PU), pus);
}

bool Mapped(const std::string& library) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    if (line.find(library) != std::string::npos) return true;
  }
  return false;
}

// Whether a discovery of this machine loads hwloc's PCI plugin (libhwloc-plugins).
bool DiscoveryLoadsPciPlugin() {
  hwloc_topology_t t = nullptr;
  EXPECT_EQ(hwloc_topology_init(&t), 0);
  EXPECT_EQ(hwloc_topology_load(t), 0);
  const bool loaded = Mapped("hwloc_pci.so");
  hwloc_topology_destroy(t);
  return loaded;
}

// An XML load needs none of hwloc's discovery plugins: they are not loaded while the topology
// lives, and the variable that kept them out is restored.
TEST_F(AgentTopologyTest, LeavesDiscoveryPluginsOut) {
  unsetenv("HWLOC_XMLFILE");
  ASSERT_EQ(setenv("HWLOC_PLUGINS_BLACKLIST", "hwloc_xml_libxml", 1), 0);
  int pus = 0;
  const std::string path = ExportLiveMachine(&pus);  // its topology destroyed: plugins unloaded
  Result<AgentTopology> t = AgentTopology::Load(path);
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_FALSE(Mapped("hwloc_pci.so"));
  EXPECT_FALSE(Mapped("hwloc_opencl.so"));
  EXPECT_STREQ(std::getenv("HWLOC_PLUGINS_BLACKLIST"), "hwloc_xml_libxml");
  unsetenv("HWLOC_PLUGINS_BLACKLIST");
}

// After a failed load, a discovery (libpmix's, in trainlet-pmix) has every plugin again.
TEST_F(AgentTopologyTest, DiscoveryAfterAFailedLoadHasItsPlugins) {
  unsetenv("HWLOC_XMLFILE");
  unsetenv("HWLOC_PLUGINS_BLACKLIST");
  if (!DiscoveryLoadsPciPlugin()) GTEST_SKIP() << "hwloc's plugins are not installed";
  const std::string path = dir_ + "/garbage.xml";
  std::ofstream(path) << "<not hwloc/>\n";
  ASSERT_FALSE(AgentTopology::Load(path).ok());
  EXPECT_EQ(std::getenv("HWLOC_PLUGINS_BLACKLIST"), nullptr);
  EXPECT_TRUE(DiscoveryLoadsPciPlugin());
}

TEST_F(AgentTopologyTest, AnotherMachinesFixtureLoadsToo) {
  const std::string fixture = std::string(TRAINLET_SOURCE_DIR) + "/tests/fixtures/cpu-2socket.xml";
  Result<AgentTopology> t = AgentTopology::Load(fixture);
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_GT(hwloc_get_nbobjs_by_type(t->get(), HWLOC_OBJ_PACKAGE), 0);
}

TEST_F(AgentTopologyTest, MissingFileIsNotFound) {
  Result<AgentTopology> t = AgentTopology::Load(dir_ + "/absent.xml");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), ErrorCode::kNotFound);
  EXPECT_NE(t.status().message().find(dir_ + "/absent.xml"), std::string::npos);
}

TEST_F(AgentTopologyTest, GarbageIsInvalid) {
  const std::string path = dir_ + "/garbage.xml";
  std::ofstream(path) << "not hwloc at all\n";
  Result<AgentTopology> t = AgentTopology::Load(path);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), ErrorCode::kInvalid) << t.status().message();
  EXPECT_NE(t.status().message().find(path), std::string::npos);
}

}  // namespace
}  // namespace trainlet::pmix
