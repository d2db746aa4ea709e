#include "common/pmix/node_topology_xml.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace trainlet::pmix {
namespace {

namespace fs = std::filesystem;

class NodeTopologyXmlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string templ = (fs::temp_directory_path() / "trainlet-topo-xml-XXXXXX").string();
    ASSERT_NE(mkdtemp(templ.data()), nullptr);
    state_dir_ = templ;
  }
  void TearDown() override { fs::remove_all(state_dir_); }
  std::string state_dir_;
};

TEST_F(NodeTopologyXmlTest, PathIsInTheStateDir) {
  EXPECT_EQ(NodeTopologyXmlPath("/var/lib/trainlet"), "/var/lib/trainlet/topology.xml");
  EXPECT_EQ(NodeTopologyXmlPath(""), "");
}

TEST_F(NodeTopologyXmlTest, NamedOnlyWhenTheAgentWroteIt) {
  std::vector<std::string> envp = {"A=1"};
  AddNodeTopologyXmlEnv(envp, state_dir_);
  EXPECT_EQ(envp, std::vector<std::string>({"A=1"}));  // no file: libpmix discovers

  std::ofstream(NodeTopologyXmlPath(state_dir_)) << "<topology/>";
  AddNodeTopologyXmlEnv(envp, state_dir_);
  EXPECT_EQ(envp, std::vector<std::string>(
                      {"A=1", "TRAINLET_PMIX_TOPOLOGY_XML=" + state_dir_ + "/topology.xml"}));
  AddNodeTopologyXmlEnv(envp, state_dir_);  // once
  EXPECT_EQ(envp.size(), 2u);

  std::vector<std::string> unknown = {"A=1"};
  AddNodeTopologyXmlEnv(unknown, "");
  EXPECT_EQ(unknown.size(), 1u);
}

TEST_F(NodeTopologyXmlTest, TheJobsOwnValueWins) {
  std::ofstream(NodeTopologyXmlPath(state_dir_)) << "<topology/>";
  std::vector<std::string> envp = {"TRAINLET_PMIX_TOPOLOGY_XML=/elsewhere.xml"};
  AddNodeTopologyXmlEnv(envp, state_dir_);
  EXPECT_EQ(envp, std::vector<std::string>({"TRAINLET_PMIX_TOPOLOGY_XML=/elsewhere.xml"}));
}

TEST_F(NodeTopologyXmlTest, ADirectoryIsNotTheFile) {
  fs::create_directory(NodeTopologyXmlPath(state_dir_));
  std::vector<std::string> envp;
  AddNodeTopologyXmlEnv(envp, state_dir_);
  EXPECT_TRUE(envp.empty());
}

}  // namespace
}  // namespace trainlet::pmix
