// --migrate-store: a SQLite store with finished and running jobs, runtimes and cordons copied
// into real etcd loses nothing (record by record), a second run changes nothing, and a target
// holding other records is refused unless forced. Also the store keys' config errors.
#include "coordinator/store_migration.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "coordinator/job_store_config.h"
#include "coordinator/missed_purges_tombstone.h"
#include "coordinator/sqlite_job_store.h"
#include "tests/coordinator/etcd_cluster.h"

namespace trainlet::coordinator {
namespace {

using testing::EtcdCluster;

JobRecord Job(const std::string& name, v1::JobPhase phase) {
  JobRecord j;
  j.name = name;
  j.spec_yaml = "kind: TrainJob\nmetadata:\n  name: " + name + "\n";
  j.runtime_kind = "ClusterTrainingRuntime";
  j.runtime_name = "torch-distributed";
  j.runtime_yaml = "kind: ClusterTrainingRuntime\n";
  j.status.set_name(name);
  j.status.set_job_phase(phase);
  j.status.set_attempt(2);
  j.status.add_placement("n1");
  j.status.add_placement("n2");
  for (int r = 0; r < 2; ++r) {
    auto* rank = j.status.add_ranks();
    rank->set_rank(r);
    rank->set_rank_state(phase == v1::JOB_PHASE_RUNNING ? v1::RANK_STATE_RUNNING
                                                        : v1::RANK_STATE_SUCCEEDED);
  }
  j.status.add_attempts()->set_attempt_result(v1::ATTEMPT_RESULT_FAILED);
  return j;
}

class StoreMigrationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/trainlet-migrate-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    auto sqlite = SqliteJobStore::Open(root_ + "/state");
    ASSERT_TRUE(sqlite.ok()) << sqlite.status().ToString();
    sqlite_ = std::move(sqlite).value();
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
  }
  void StartEtcd() {
    std::string error;
    cluster_ = EtcdCluster::Start(1, &error);
    if (cluster_ == nullptr) {
      if (EtcdCluster::Binary().empty()) GTEST_SKIP() << error;
      FAIL() << error;
    }
    EtcdStoreConfig config;
    config.client.endpoints = cluster_->client_urls();
    config.prefix = "/trainlet/prod/";
    auto etcd = EtcdJobStore::Open(config);
    ASSERT_TRUE(etcd.ok()) << etcd.status().ToString();
    etcd_ = std::move(etcd).value();
  }
  void Fill(int running, int finished) {
    for (int i = 0; i < running + finished; ++i) {
      const bool run = i % 2 == 0 ? i / 2 < running : false;
      JobRecord j = Job("job-" + std::to_string(i),
                        run ? v1::JOB_PHASE_RUNNING
                            : (i % 3 == 0 ? v1::JOB_PHASE_FAILED : v1::JOB_PHASE_SUCCEEDED));
      ASSERT_TRUE(sqlite_->CreateJob(j).ok());
    }
    ASSERT_TRUE(sqlite_->PutRuntime({"ClusterTrainingRuntime", "torch-distributed", "a"}).ok());
    ASSERT_TRUE(sqlite_->PutRuntime({"TrainingRuntime", "mine", "b"}).ok());
    ASSERT_TRUE(sqlite_->PutNodeCordon({"n3", "disk", true, 1700000000000}).ok());
  }

  std::string root_;
  std::unique_ptr<SqliteJobStore> sqlite_;
  std::unique_ptr<EtcdCluster> cluster_;
  std::unique_ptr<EtcdJobStore> etcd_;
};

TEST_F(StoreMigrationTest, CopiesEveryRecordAndASecondRunChangesNothing) {
  Fill(20, 80);  // 100 jobs: several transactions
  StartEtcd();
  auto report = MigrateStore(*sqlite_, *etcd_, false);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->jobs, 100u);
  EXPECT_EQ(report->runtimes, 2u);
  EXPECT_EQ(report->cordons, 1u);
  EXPECT_FALSE(report->already_migrated);

  // Record by record, as a coordinator reading the etcd store sees them.
  auto before = sqlite_->ListJobs();
  auto after = etcd_->ListJobs();
  ASSERT_TRUE(before.ok() && after.ok());
  ASSERT_EQ(before->size(), after->size());
  for (size_t i = 0; i < before->size(); ++i) {
    const JobRecord& a = (*before)[i];
    const JobRecord& b = (*after)[i];
    EXPECT_EQ(a.name, b.name);
    EXPECT_EQ(a.spec_yaml, b.spec_yaml);
    EXPECT_EQ(a.runtime_yaml, b.runtime_yaml);
    EXPECT_EQ(a.status.SerializeAsString(), b.status.SerializeAsString()) << a.name;
  }
  EXPECT_EQ((*after)[0].status.job_phase(), v1::JOB_PHASE_RUNNING);
  EXPECT_EQ(FirstDifference(*sqlite_, *etcd_), "");

  auto keys = etcd_->CountKeys();
  auto again = MigrateStore(*sqlite_, *etcd_, false);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_TRUE(again->already_migrated);
  EXPECT_EQ(*etcd_->CountKeys(), *keys);
}

TEST_F(StoreMigrationTest, ATargetWithOtherRecordsIsRefusedUnlessForced) {
  Fill(1, 2);
  StartEtcd();
  ASSERT_TRUE(etcd_->CreateJob(Job("someone-else", v1::JOB_PHASE_PENDING)).ok());
  auto refused = MigrateStore(*sqlite_, *etcd_, false);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), ErrorCode::kExists);
  EXPECT_NE(refused.status().message().find("--force"), std::string::npos);
  EXPECT_TRUE((*etcd_->GetJob("someone-else")).has_value());

  auto forced = MigrateStore(*sqlite_, *etcd_, true);
  ASSERT_TRUE(forced.ok()) << forced.status().ToString();
  EXPECT_EQ(FirstDifference(*sqlite_, *etcd_), "");
  EXPECT_FALSE((*etcd_->GetJob("someone-else")).has_value());
}

// --force replaces the target's records, and with them its purge tombstones (which name the
// target's deleted jobs); the source's arrive.
TEST_F(StoreMigrationTest, ForceDropsTheTargetsPurgeTombstones) {
  Fill(1, 1);
  const PurgeTombstone mine{"n1", "a", "uid-a", 1, false};
  ASSERT_TRUE(sqlite_->PutClusterValue(mine.Key(), mine.Value()).ok());
  StartEtcd();
  ASSERT_TRUE(etcd_->CreateJob(Job("someone-else", v1::JOB_PHASE_PENDING)).ok());
  const PurgeTombstone theirs{"n9", "someone-gone", "uid-x", 1, false};
  ASSERT_TRUE(etcd_->PutClusterValue(theirs.Key(), theirs.Value()).ok());
  auto forced = MigrateStore(*sqlite_, *etcd_, true);
  ASSERT_TRUE(forced.ok()) << forced.status().ToString();
  auto left = etcd_->ListClusterValues(kPurgeTombstonePrefix);
  ASSERT_TRUE(left.ok()) << left.status().ToString();
  ASSERT_EQ(left->size(), 1u);
  EXPECT_EQ((*left)[0].first, mine.Key());
}

// The Terminating marks of queue objects deleted while in use (queue_catalog.h) go with the
// records --force replaces: a target's mark left behind would make the source's ClusterQueue of
// that name Terminating after the move. The source's marks arrive.
TEST_F(StoreMigrationTest, ForceDropsTheTargetsTerminatingMarks) {
  Fill(1, 1);
  ASSERT_TRUE(sqlite_->PutQueueObject({"ClusterQueue", "", "team-a", "spec: {}"}).ok());
  ASSERT_TRUE(sqlite_->PutQueueObject({"ResourceFlavor", "", "a100", "spec: {}"}).ok());
  const std::string mark = R"({"by":"alice","deletedMs":1,"version":1})";
  ASSERT_TRUE(sqlite_->PutClusterValue("queue-deleting/ResourceFlavor/a100", mark).ok());
  StartEtcd();
  ASSERT_TRUE(etcd_->PutQueueObject({"ClusterQueue", "", "team-a", "spec: {old: 1}"}).ok());
  ASSERT_TRUE(etcd_->PutClusterValue("queue-deleting/ClusterQueue/team-a", mark).ok());
  auto forced = MigrateStore(*sqlite_, *etcd_, true);
  ASSERT_TRUE(forced.ok()) << forced.status().ToString();
  auto marks = etcd_->ListClusterValues("queue-deleting/");
  ASSERT_TRUE(marks.ok()) << marks.status().ToString();
  ASSERT_EQ(marks->size(), 1u);
  EXPECT_EQ((*marks)[0].first, "queue-deleting/ResourceFlavor/a100");
  EXPECT_EQ((*marks)[0].second, mark);
}

// Kueue's queue objects (issue 14) are copied too, and a target that lacks one differs.
TEST_F(StoreMigrationTest, CopiesQueueObjects) {
  Fill(1, 1);
  ASSERT_TRUE(sqlite_->PutQueueObject({"ClusterQueue", "", "team-a", "spec: {}"}).ok());
  ASSERT_TRUE(sqlite_->PutQueueObject({"LocalQueue", "team-a", "q", "spec: {}"}).ok());
  StartEtcd();
  auto report = MigrateStore(*sqlite_, *etcd_, false);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->queue_objects, 2u);
  auto copied = etcd_->ListQueueObjects();
  ASSERT_TRUE(copied.ok());
  ASSERT_EQ(copied->size(), 2u);
  EXPECT_EQ((*copied)[1], (QueueObjectRecord{"LocalQueue", "team-a", "q", "spec: {}"}));
  EXPECT_EQ(FirstDifference(*sqlite_, *etcd_), "");
  ASSERT_TRUE(etcd_->DeleteQueueObject("LocalQueue", "team-a", "q").ok());
  EXPECT_NE(FirstDifference(*sqlite_, *etcd_), "");
}

// The purges that wait for nodes away at a delete (missed_purges_tombstone.h) move with the
// store, beside fair sharing's history: on today's main only the history was copied.
TEST_F(StoreMigrationTest, CopiesPurgeTombstonesAndClusterValues) {
  Fill(1, 1);
  const PurgeTombstone a{"n2", "gone", "uid-1", 1700000000000, true};
  const PurgeTombstone b{"n3", "gone", "uid-1", 1700000000000, true};
  ASSERT_TRUE(sqlite_->PutClusterValue(a.Key(), a.Value()).ok());
  ASSERT_TRUE(sqlite_->PutClusterValue(b.Key(), b.Value()).ok());
  ASSERT_TRUE(sqlite_->PutClusterValue("fair-share-history", "{}").ok());
  StartEtcd();
  auto report = MigrateStore(*sqlite_, *etcd_, false);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  auto copied = etcd_->ListClusterValues(kPurgeTombstonePrefix);
  ASSERT_TRUE(copied.ok()) << copied.status().ToString();
  ASSERT_EQ(copied->size(), 2u);
  auto decoded = DecodePurgeTombstone((*copied)[1].first, (*copied)[1].second);
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ(*decoded, b);
  EXPECT_EQ(*etcd_->GetClusterValue("fair-share-history"), "{}");
}

TEST(JobStoreConfigTest, ErrorsNameTheKey) {
  JobStoreConfig config;
  config.backend = "etcd";
  EXPECT_EQ(OpenJobStore(config).status().message(), "etcd_endpoints: required with store: etcd");
  config.etcd_endpoints = "127.0.0.1:2379";
  EXPECT_EQ(OpenJobStore(config).status().message(),
            "etcd_endpoints: \"127.0.0.1:2379\": must be http://host:port or https://host:port");
  config.etcd_endpoints = "https://a:2379, https://b:2379";
  EXPECT_EQ(SplitEndpoints(config.etcd_endpoints),
            (std::vector<std::string>{"https://a:2379", "https://b:2379"}));
  config.etcd.client.ca_file = "/nonexistent/ca.pem";
  EXPECT_EQ(OpenJobStore(config).status().message(),
            "etcd_ca_file: /nonexistent/ca.pem: no such file");
  config.backend = "zookeeper";
  EXPECT_EQ(OpenJobStore(config).status().message(),
            "store: must be sqlite or etcd, got \"zookeeper\"");

  char tmpl[] = "/tmp/trainlet-storecfg-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string file = std::string(tmpl) + "/coordinator.yaml";
  std::ofstream(file) << "store: etcd\netcd_endpoints: [http://a:2379, http://b:2379]\n"
                         "etcd_prefix: /trainlet/prod/\nheartbeat_ms: 1000\n";
  auto loaded = LoadJobStoreConfig(file);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(SplitEndpoints(loaded->etcd_endpoints),
            (std::vector<std::string>{"http://a:2379", "http://b:2379"}));
  EXPECT_EQ(loaded->etcd.prefix, "/trainlet/prod/");
  std::ofstream(file) << "store: sqlite\n";
  EXPECT_EQ(LoadJobStoreConfig(file).status().message(),
            file + ": store: the target of --migrate-store must be store: etcd");
  std::filesystem::remove_all(tmpl);
}

}  // namespace
}  // namespace trainlet::coordinator
