#include "trainletctl/local_cluster_layout.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace trainlet::cli {
namespace {

namespace fs = std::filesystem;

TEST(LocalAgentSlots, GenerousUnlessAskedOrImpersonating) {
  EXPECT_EQ(LocalAgentSlots(0, false, 2), kLocalAgentMinSlots);  // a 2-core laptop still runs 4x2
  EXPECT_EQ(LocalAgentSlots(0, false, 64), 64u);                 // one per PU when that is more
  EXPECT_EQ(LocalAgentSlots(3, false, 64), 3u);                  // --slots wins
  EXPECT_EQ(LocalAgentSlots(0, true, 2), 0u);  // --topology: the agent's own default
}

TEST(LocalAgentHostname, PerNodeAndPerClusterAndShortEnough) {
  const std::string a = LocalAgentHostname("/tmp/a", "node-1");
  EXPECT_EQ(a.rfind("node-1-", 0), 0u);
  EXPECT_EQ(a.size(), std::string("node-1-").size() + 8);
  EXPECT_EQ(a, LocalAgentHostname("/tmp/a", "node-1"));  // stable
  EXPECT_NE(a, LocalAgentHostname("/tmp/a", "node-2"));
  EXPECT_NE(a, LocalAgentHostname("/tmp/b", "node-1"));  // two clusters on one host differ
  EXPECT_LE(LocalAgentHostname("/tmp/a", std::string(200, 'n')).size(), 63u);
}

class CoordinatorListenTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("listen-test-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
            "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(CoordinatorListenTest, MissingMeansPortZeroAndSavedComesBack) {
  const std::string path = CoordinatorListenPath(dir_.string());
  auto none = LoadCoordinatorListen(path);
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_FALSE(none->has_value());
  ASSERT_TRUE(SaveCoordinatorListen(
                  path, {"tcp://127.0.0.1:4001", "tcp://127.0.0.1:4002", "tcp://127.0.0.1:4003"})
                  .ok());
  auto got = LoadCoordinatorListen(path);
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ((*got)->agent, "tcp://127.0.0.1:4001");
  EXPECT_EQ((*got)->op, "tcp://127.0.0.1:4002");
  EXPECT_EQ((*got)->exec, "tcp://127.0.0.1:4003");
}

TEST_F(CoordinatorListenTest, DamagedFileIsAnErrorNamingIt) {
  const std::string path = CoordinatorListenPath(dir_.string());
  std::ofstream(path) << "{\"agent\": \"tcp://127.0.0.1:1\"";
  auto bad = LoadCoordinatorListen(path);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find(path), std::string::npos);
  std::ofstream(path, std::ios::trunc)
      << R"({"agent": "ipc:///x", "operator": "tcp://a:1", "exec": "tcp://a:2"})";
  EXPECT_FALSE(LoadCoordinatorListen(path).ok());
}

}  // namespace
}  // namespace trainlet::cli
