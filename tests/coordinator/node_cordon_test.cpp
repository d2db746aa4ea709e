// Cordons outlive a coordinator restart: JobStore's node_cordons table, and NodeRegistry writing
// each change there before it takes effect and applying stored ones at re-registration.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <stdlib.h>

#include <filesystem>
#include <memory>

#include "coordinator/job_store.h"
#include "coordinator/node_registry.h"

namespace trainlet::coordinator {
namespace {

using Clock = NodeRegistry::Clock;
using std::chrono::milliseconds;
constexpr int64_t kT0 = 1'700'000'000'000;

class NodeCordonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/trainlet-cordon-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    Reopen();
  }
  void TearDown() override {
    store_.reset();
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
  }
  // A coordinator restart: the store reopened from disk and a fresh registry loading from it.
  void Reopen() {
    store_.reset();
    auto s = JobStore::Open(root_ + "/state");
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(s).value();
    registry_ = std::make_unique<NodeRegistry>(milliseconds(1000), milliseconds(3000));
    Status loaded = registry_->LoadCordons(store_.get());
    ASSERT_TRUE(loaded.ok()) << loaded.ToString();
  }
  void Register(const std::string& name) {
    v1::NodeInfo info;
    info.set_name(name);
    info.set_slots(4);
    Status s = registry_->Register(info, "rid-" + name, "key-" + name, Clock::now(), kT0);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  std::vector<NodeCordonRecord> Stored() {
    auto r = store_->ListNodeCordons();
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : std::vector<NodeCordonRecord>{};
  }

  std::string root_;
  std::unique_ptr<JobStore> store_;
  std::unique_ptr<NodeRegistry> registry_;
};

TEST_F(NodeCordonTest, StoreRoundTripSurvivesReopen) {
  ASSERT_TRUE(store_->PutNodeCordon({"node-b", "disk swap", false, kT0}).ok());
  ASSERT_TRUE(store_->PutNodeCordon({"node-a", "", true, kT0 + 5}).ok());
  // Put replaces the node's record.
  ASSERT_TRUE(store_->PutNodeCordon({"node-b", "bad DIMM", true, kT0 + 9}).ok());
  Reopen();
  auto all = Stored();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].node, "node-a");
  EXPECT_EQ(all[0].reason, "");
  EXPECT_TRUE(all[0].drain);
  EXPECT_EQ(all[0].since_unix_ms, kT0 + 5);
  EXPECT_EQ(all[1].node, "node-b");
  EXPECT_EQ(all[1].reason, "bad DIMM");
  EXPECT_TRUE(all[1].drain);
  EXPECT_EQ(all[1].since_unix_ms, kT0 + 9);
  ASSERT_TRUE(store_->DeleteNodeCordon("node-a").ok());
  ASSERT_TRUE(store_->DeleteNodeCordon("never-cordoned").ok());
  Reopen();
  all = Stored();
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].node, "node-b");
}

TEST_F(NodeCordonTest, VersionOneDatabaseGainsTheTableAndKeepsItsJobs) {
  JobRecord job;
  job.name = "old";
  job.spec_yaml = "kind: TrainJob";
  job.runtime_kind = "ClusterTrainingRuntime";
  job.runtime_name = "plain";
  job.runtime_yaml = "kind: ClusterTrainingRuntime";
  ASSERT_TRUE(store_->CreateJob(job).ok());
  store_.reset();
  // Turn the file back into what trainlet with schema 1 wrote.
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((root_ + "/state/trainlet.db").c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(
                db, "DROP TABLE node_cordons; DROP TABLE queue_objects; PRAGMA user_version = 1;",
                nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  Reopen();
  EXPECT_TRUE(Stored().empty());
  ASSERT_TRUE(store_->PutNodeCordon({"n1", "r", false, kT0}).ok());
  auto got = store_->GetJob("old");
  ASSERT_TRUE(got.ok());
  ASSERT_TRUE(got->has_value());
  EXPECT_EQ((*got)->spec_yaml, "kind: TrainJob");
}

TEST_F(NodeCordonTest, CordonIsStoredAndAppliedWhenTheNodeRegistersAfterARestart) {
  Register("n1");
  Register("n2");
  auto changed = registry_->SetSchedulable("n1", false, "maintenance", false, kT0 + 10);
  ASSERT_TRUE(changed.ok()) << changed.status().ToString();
  EXPECT_TRUE(*changed);
  ASSERT_EQ(Stored().size(), 1u);  // on disk before SetSchedulable returned
  EXPECT_EQ(Stored()[0].reason, "maintenance");

  Reopen();
  EXPECT_EQ(registry_->Find("n1"), nullptr);
  ASSERT_EQ(registry_->pending_cordons().count("n1"), 1u);
  Register("n1");
  Register("n2");
  const NodeEntry* n1 = registry_->Find("n1");
  ASSERT_NE(n1, nullptr);
  EXPECT_FALSE(n1->schedulable);
  EXPECT_EQ(n1->cordon_reason, "maintenance");
  EXPECT_FALSE(n1->drained);
  EXPECT_EQ(n1->cordoned_unix_ms, kT0 + 10);
  EXPECT_TRUE(registry_->Find("n2")->schedulable);
  EXPECT_TRUE(registry_->pending_cordons().empty());

  // Uncordon removes the record: the next restart finds the node schedulable.
  changed = registry_->SetSchedulable("n1", true, "");
  ASSERT_TRUE(changed.ok());
  EXPECT_TRUE(*changed);
  EXPECT_TRUE(Stored().empty());
  Reopen();
  Register("n1");
  EXPECT_TRUE(registry_->Find("n1")->schedulable);
}

TEST_F(NodeCordonTest, DrainMarkAndReasonUpdatesKeepTheCordonStart) {
  Register("n1");
  ASSERT_TRUE(registry_->SetSchedulable("n1", false, "first", false, kT0 + 1).ok());
  auto changed = registry_->SetSchedulable("n1", false, "drained", true, kT0 + 50);
  ASSERT_TRUE(changed.ok());
  EXPECT_FALSE(*changed);  // it already was unschedulable
  const NodeEntry* n1 = registry_->Find("n1");
  EXPECT_TRUE(n1->drained);
  EXPECT_EQ(n1->cordon_reason, "drained");
  EXPECT_EQ(n1->cordoned_unix_ms, kT0 + 1);
  ASSERT_EQ(Stored().size(), 1u);
  EXPECT_TRUE(Stored()[0].drain);
  EXPECT_EQ(Stored()[0].reason, "drained");
  EXPECT_EQ(Stored()[0].since_unix_ms, kT0 + 1);
}

TEST_F(NodeCordonTest, StoredCordonOfAnAbsentNodeCanBeLifted) {
  Register("gone");
  ASSERT_TRUE(registry_->SetSchedulable("gone", false, "decommissioned").ok());
  Reopen();
  auto changed = registry_->SetSchedulable("gone", true, "");
  ASSERT_TRUE(changed.ok()) << changed.status().ToString();
  EXPECT_TRUE(*changed);
  EXPECT_TRUE(Stored().empty());
  EXPECT_TRUE(registry_->pending_cordons().empty());
  // A name never seen is still NotFound.
  auto unknown = registry_->SetSchedulable("nobody", false, "");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), ErrorCode::kNotFound);
}

// A store that refuses writes: the registry must not change what it was told to store.
class RefusingStore : public NodeCordonStore {
 public:
  Status PutNodeCordon(const NodeCordonRecord&) override { return IoError("disk full"); }
  Status DeleteNodeCordon(const std::string&) override { return IoError("disk full"); }
  Result<std::vector<NodeCordonRecord>> ListNodeCordons() override {
    return std::vector<NodeCordonRecord>{};
  }
};

TEST_F(NodeCordonTest, RefusedWriteLeavesTheNodeAsItWas) {
  RefusingStore refusing;
  NodeRegistry registry(milliseconds(1000), milliseconds(3000));
  ASSERT_TRUE(registry.LoadCordons(&refusing).ok());
  v1::NodeInfo info;
  info.set_name("n1");
  ASSERT_TRUE(registry.Register(info, "rid", "key", Clock::now(), kT0).ok());
  auto changed = registry.SetSchedulable("n1", false, "x");
  ASSERT_FALSE(changed.ok());
  EXPECT_EQ(changed.status().code(), ErrorCode::kIo);
  EXPECT_TRUE(registry.Find("n1")->schedulable);
}

}  // namespace
}  // namespace trainlet::coordinator
