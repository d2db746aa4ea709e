// EstablishClusterId (coordinator/cluster_identity.h) on a real SQLite store: a store that holds
// nothing is refused without init (issue 19, defect 3); init makes an id once; a store written
// before identities, which holds records, adopts one.
#include "coordinator/cluster_identity.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "coordinator/sqlite_job_store.h"
#include "tests/common/test_dir.h"

namespace trainlet::coordinator {
namespace {

std::unique_ptr<JobStore> OpenOrDie(const std::string& dir) {
  auto store = SqliteJobStore::Open(dir);
  EXPECT_TRUE(store.ok()) << store.status().ToString();
  return store.ok() ? std::move(store).value() : nullptr;
}

TEST(ClusterIdentityTest, AnEmptyStoreIsRefusedWithoutInit) {
  testing::TempDir dir;
  auto store = OpenOrDie(dir.path());
  ASSERT_NE(store, nullptr);
  auto refused = EstablishClusterId(*store, false);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("--init-store"), std::string::npos);
  EXPECT_EQ(*store->GetClusterId(), "") << "a refusal stores nothing";
}

TEST(ClusterIdentityTest, InitMakesAnIdOnceAndItIsKept) {
  testing::TempDir dir;
  std::string id;
  {
    auto store = OpenOrDie(dir.path());
    auto made = EstablishClusterId(*store, true, [] { return std::string("first"); });
    ASSERT_TRUE(made.ok()) << made.status().ToString();
    EXPECT_EQ(*made, "first");
    auto again = EstablishClusterId(*store, true, [] { return std::string("second"); });
    EXPECT_EQ(*again, "first") << "init on an initialised store keeps its id";
  }
  auto reopened = OpenOrDie(dir.path());
  auto kept = EstablishClusterId(*reopened, false);
  ASSERT_TRUE(kept.ok()) << kept.status().ToString();
  EXPECT_EQ(*kept, "first");
}

TEST(ClusterIdentityTest, AStoreWithRecordsButNoIdAdoptsOne) {
  testing::TempDir dir;
  auto store = OpenOrDie(dir.path());
  ASSERT_TRUE(store->PutNodeCordon({"n1", "maintenance", false, 1}).ok());
  auto adopted = EstablishClusterId(*store, false, [] { return std::string("adopted"); });
  ASSERT_TRUE(adopted.ok()) << adopted.status().ToString();
  EXPECT_EQ(*store->GetClusterId(), "adopted");
}

TEST(ClusterIdentityTest, ATruncatedDatabaseIsAnEmptyStore) {
  testing::TempDir dir;
  {
    auto store = OpenOrDie(dir.path());
    ASSERT_TRUE(EstablishClusterId(*store, true).ok());
  }
  for (const char* f : {"trainlet.db", "trainlet.db-wal", "trainlet.db-shm"}) {
    std::filesystem::remove(std::filesystem::path(dir.path()) / f);
  }
  std::ofstream(std::filesystem::path(dir.path()) / "trainlet.db").close();  // 0 bytes
  auto store = OpenOrDie(dir.path());
  EXPECT_FALSE(EstablishClusterId(*store, false).ok());
}

TEST(ClusterIdentityTest, NewIdsAreHexAndDiffer) {
  const std::string a = NewClusterId(), b = NewClusterId();
  EXPECT_EQ(a.size(), 32u);
  EXPECT_EQ(a.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_NE(a, b);
}

}  // namespace
}  // namespace trainlet::coordinator
