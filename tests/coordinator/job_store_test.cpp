// The JobStore contract, run against both backends (JobStoreContractTest: SQLite, and etcd on a
// real one-member cluster), then what is particular to SQLite's files (JobStoreTest).
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "coordinator/etcd_job_store.h"
#include "coordinator/sqlite_job_store.h"
#include "tests/common/counting_sqlite_vfs.h"
#include "tests/common/test_dir.h"
#include "tests/coordinator/etcd_cluster.h"

namespace trainlet::coordinator {
namespace {

namespace fs = std::filesystem;

class JobStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/trainlet-job-store-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    dir_ = root_ + "/state";
  }
  void TearDown() override {
    std::error_code ec;
    fs::permissions(root_, fs::perms::owner_all, ec);
    fs::remove_all(root_, ec);
  }

  std::unique_ptr<SqliteJobStore> OpenOrDie() {
    auto store = SqliteJobStore::Open(dir_);
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    return store.ok() ? std::move(store).value() : nullptr;
  }

  static JobRecord Job(const std::string& name) {
    JobRecord j;
    j.name = name;
    j.spec_yaml = "kind: TrainJob\nmetadata:\n  name: " + name + "\n";
    j.runtime_kind = "ClusterTrainingRuntime";
    j.runtime_name = "torch-distributed";
    j.runtime_yaml = "kind: ClusterTrainingRuntime\n";
    j.status.set_name(name);
    j.status.set_job_phase(v1::JOB_PHASE_PENDING);
    j.status.set_num_nodes(2);
    j.status.add_placement("n1");
    return j;
  }

  std::string root_;
  std::string dir_;
};

// One etcd member for the whole binary, killed by PID when the tests end.
class SharedEtcd : public ::testing::Environment {
 public:
  static testing::EtcdCluster* Get(std::string* error) {
    if (cluster_ == nullptr && error_.empty()) {
      cluster_ = testing::EtcdCluster::Start(1, &error_).release();
    }
    *error = error_;
    return cluster_;
  }
  void TearDown() override {
    delete cluster_;
    cluster_ = nullptr;
  }

 private:
  static inline testing::EtcdCluster* cluster_ = nullptr;
  static inline std::string error_;
};
[[maybe_unused]] ::testing::Environment* const kSharedEtcd =
    ::testing::AddGlobalTestEnvironment(new SharedEtcd);

// The same tests on each backend: "sqlite" (a database under a temp dir) or "etcd" (a fresh
// prefix of the shared member per test). Opening again is what a restarted coordinator does.
class JobStoreContractTest : public JobStoreTest,
                             public ::testing::WithParamInterface<std::string> {
 protected:
  void SetUp() override {
    JobStoreTest::SetUp();
    if (GetParam() != "etcd") return;
    std::string error;
    etcd_ = SharedEtcd::Get(&error);
    if (etcd_ == nullptr) GTEST_SKIP() << error;
    static int counter = 0;
    prefix_ = "/trainlet-test/" + std::to_string(getpid()) + "-" + std::to_string(++counter) + "/";
  }

  std::unique_ptr<JobStore> OpenOrDie() {
    if (GetParam() == "sqlite") return JobStoreTest::OpenOrDie();
    EtcdStoreConfig config;
    config.client.endpoints = etcd_->client_urls();
    config.prefix = prefix_;
    auto store = EtcdJobStore::Open(config);
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    return store.ok() ? std::move(store).value() : nullptr;
  }

  testing::EtcdCluster* etcd_ = nullptr;
  std::string prefix_;
};

INSTANTIATE_TEST_SUITE_P(Backends, JobStoreContractTest, ::testing::Values("sqlite", "etcd"),
                         [](const auto& info) { return info.param; });

TEST_F(JobStoreTest, CreatesDirSchemaAndWal) {
  auto store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  EXPECT_TRUE(fs::is_regular_file(dir_ + "/trainlet.db"));
  EXPECT_EQ(store->path(), dir_ + "/trainlet.db");
  EXPECT_EQ(fs::status(dir_).permissions() & fs::perms::all, fs::perms::owner_all);
  ASSERT_TRUE(store->CreateJob(Job("a")).ok());
  // A WAL-mode write leaves the -wal file beside the database.
  EXPECT_TRUE(fs::exists(dir_ + "/trainlet.db-wal"));

  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((dir_ + "/trainlet.db").c_str(), &db), SQLITE_OK);
  sqlite3_stmt* s = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &s, nullptr), SQLITE_OK);
  ASSERT_EQ(sqlite3_step(s), SQLITE_ROW);
  EXPECT_STREQ(reinterpret_cast<const char*>(sqlite3_column_text(s, 0)), "wal");
  sqlite3_finalize(s);
  sqlite3_close(db);
}

// Group commit (issue 16): a deferred commit syncs nothing; the next synced commit or Sync makes
// it durable with one sync of the WAL; Sync with nothing waiting syncs nothing. What was committed
// either way is read back by another connection and after a reopen.
TEST_F(JobStoreTest, DeferredCommitIsSyncedByTheNextCommitOrBySyncOnce) {
  trainlet::testing::CountingSqliteVfs vfs;
  auto store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->CreateJob(Job("first")).ok());  // the WAL exists from here on
  int before = vfs.wal_syncs();
  ASSERT_TRUE(store->TransactionDeferringSync([&] { return store->CreateJob(Job("a")); }).ok());
  EXPECT_EQ(vfs.wal_syncs(), before);  // written, not synced
  v1::JobStatus placed = Job("a").status;
  placed.add_placement("n2");
  ASSERT_TRUE(store->Transaction([&] { return store->UpdateStatus("a", placed); }).ok());
  EXPECT_GE(vfs.wal_syncs(), before + 1);  // the placement's sync covers the apply's frames
  before = vfs.wal_syncs();
  ASSERT_TRUE(store->Sync().ok());
  EXPECT_EQ(vfs.wal_syncs(), before);  // nothing waited

  ASSERT_TRUE(store->TransactionDeferringSync([&] { return store->CreateJob(Job("b")); }).ok());
  EXPECT_EQ(vfs.wal_syncs(), before);
  ASSERT_TRUE(store->Sync().ok());
  EXPECT_EQ(vfs.wal_syncs(), before + 1);
  ASSERT_TRUE(store->Sync().ok());
  EXPECT_EQ(vfs.wal_syncs(), before + 1);

  // A deferred body that fails stores nothing and leaves nothing to sync; nested, it is the outer
  // transaction's.
  EXPECT_FALSE(store->TransactionDeferringSync([&] { return store->CreateJob(Job("a")); }).ok());
  ASSERT_TRUE(store
                  ->Transaction([&] {
                    return store->TransactionDeferringSync(
                        [&] { return store->CreateJob(Job("c")); });
                  })
                  .ok());
  before = vfs.wal_syncs();
  ASSERT_TRUE(store->Sync().ok());
  EXPECT_EQ(vfs.wal_syncs(), before);

  // Later commits still sync (synchronous is FULL again after a deferred commit).
  ASSERT_TRUE(store->CreateJob(Job("d")).ok());
  EXPECT_GE(vfs.wal_syncs(), before + 1);
  store.reset();
  auto again = OpenOrDie();
  ASSERT_NE(again, nullptr);
  auto jobs = again->ListJobs();
  ASSERT_TRUE(jobs.ok());
  std::vector<std::string> names;
  for (const auto& j : *jobs) names.push_back(j.name);
  EXPECT_EQ(names, (std::vector<std::string>{"first", "a", "b", "c", "d"}));
  EXPECT_EQ((*jobs)[1].status.placement_size(), 2);
}

mode_t ModeOf(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

// Issue 19: under a permissive umask, another user could read a job's secret env from the WAL.
// The store sets its own modes: the directory 0700, the database, -wal and -shm 0600.
TEST_F(JobStoreTest, FilesArePrivateUnderUmaskZero) {
  testing::ScopedUmask umask0(0);
  auto store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->CreateJob(Job("secret")).ok());
  EXPECT_EQ(ModeOf(dir_), 0700u);
  for (const char* file : {"/trainlet.db", "/trainlet.db-wal", "/trainlet.db-shm"}) {
    ASSERT_TRUE(fs::exists(dir_ + file)) << file;
    EXPECT_EQ(ModeOf(dir_ + file), 0600u) << file;
  }
}

// A directory the operator made (`trainletctl local up --dir`, or by hand) with looser bits is
// tightened, and so are database files an earlier run left readable.
TEST_F(JobStoreTest, TightensAGivenDirectoryAndLeftOverFiles) {
  testing::ScopedUmask umask0(0);
  ASSERT_EQ(mkdir(dir_.c_str(), 0755), 0);
  {
    auto store = OpenOrDie();
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(store->CreateJob(Job("a")).ok());
  }
  ASSERT_EQ(ModeOf(dir_), 0700u);
  ASSERT_EQ(chmod(dir_.c_str(), 0755), 0);
  ASSERT_EQ(chmod((dir_ + "/trainlet.db").c_str(), 0644), 0);
  std::ofstream(dir_ + "/trainlet.db-shm");  // left by a crash, readable by all under umask 0
  ASSERT_EQ(ModeOf(dir_ + "/trainlet.db-shm"), 0666u);

  auto store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->CreateJob(Job("b")).ok());
  EXPECT_EQ(ModeOf(dir_), 0700u);
  for (const char* file : {"/trainlet.db", "/trainlet.db-wal", "/trainlet.db-shm"}) {
    EXPECT_EQ(ModeOf(dir_ + file), 0600u) << file;
  }
}

TEST_P(JobStoreContractTest, RoundTrip) {
  auto store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  JobRecord j = Job("hello");
  j.spec_yaml += std::string("binary\0zero", 11);  // lengths, not C strings
  ASSERT_TRUE(store->CreateJob(j).ok());

  auto got = store->GetJob("hello");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_TRUE(got->has_value());
  const JobRecord& g = **got;
  EXPECT_EQ(g.name, "hello");
  EXPECT_EQ(g.spec_yaml, j.spec_yaml);
  EXPECT_EQ(g.runtime_kind, "ClusterTrainingRuntime");
  EXPECT_EQ(g.runtime_name, "torch-distributed");
  EXPECT_EQ(g.runtime_yaml, j.runtime_yaml);
  EXPECT_EQ(g.status.SerializeAsString(), j.status.SerializeAsString());

  auto missing = store->GetJob("nope");
  ASSERT_TRUE(missing.ok());
  EXPECT_FALSE(missing->has_value());

  v1::JobStatus st = j.status;
  st.set_job_phase(v1::JOB_PHASE_RUNNING);
  st.set_attempt(3);
  ASSERT_TRUE(store->UpdateStatus("hello", st).ok());
  got = store->GetJob("hello");
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ((*got)->status.job_phase(), v1::JOB_PHASE_RUNNING);
  EXPECT_EQ((*got)->status.attempt(), 3u);

  EXPECT_EQ(store->UpdateStatus("nope", st).code(), ErrorCode::kNotFound);
}

TEST_P(JobStoreContractTest, DuplicateCreateIsRefused) {
  auto store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->CreateJob(Job("dup")).ok());
  JobRecord again = Job("dup");
  again.spec_yaml = "different";
  Status st = store->CreateJob(again);
  EXPECT_EQ(st.code(), ErrorCode::kExists);
  EXPECT_EQ(st.message(), "trainjob/dup already exists");
  auto got = store->GetJob("dup");
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_NE((*got)->spec_yaml, "different");
}

TEST_P(JobStoreContractTest, ListIsInCreationOrderAndDeleteWorks) {
  auto store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  for (const char* n : {"zeta", "alpha", "mid"}) ASSERT_TRUE(store->CreateJob(Job(n)).ok());
  auto jobs = store->ListJobs();
  ASSERT_TRUE(jobs.ok());
  ASSERT_EQ(jobs->size(), 3u);
  EXPECT_EQ((*jobs)[0].name, "zeta");
  EXPECT_EQ((*jobs)[1].name, "alpha");
  EXPECT_EQ((*jobs)[2].name, "mid");

  ASSERT_TRUE(store->DeleteJob("zeta").ok());
  EXPECT_EQ(store->DeleteJob("zeta").code(), ErrorCode::kNotFound);
  // A job applied again after delete is the newest.
  ASSERT_TRUE(store->CreateJob(Job("zeta")).ok());
  jobs = store->ListJobs();
  ASSERT_TRUE(jobs.ok());
  ASSERT_EQ(jobs->size(), 3u);
  EXPECT_EQ((*jobs)[0].name, "alpha");
  EXPECT_EQ((*jobs)[2].name, "zeta");
}

TEST_P(JobStoreContractTest, RuntimesUpsertByKindAndName) {
  auto store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->PutRuntime({"TrainingRuntime", "torch", "v1"}).ok());
  ASSERT_TRUE(store->PutRuntime({"ClusterTrainingRuntime", "torch", "c1"}).ok());
  ASSERT_TRUE(store->PutRuntime({"ClusterTrainingRuntime", "mpi", "m1"}).ok());
  ASSERT_TRUE(store->PutRuntime({"TrainingRuntime", "torch", "v2"}).ok());
  auto rts = store->ListRuntimes();
  ASSERT_TRUE(rts.ok());
  ASSERT_EQ(rts->size(), 3u);
  EXPECT_EQ((*rts)[0].kind, "ClusterTrainingRuntime");
  EXPECT_EQ((*rts)[0].name, "mpi");
  EXPECT_EQ((*rts)[1].yaml, "c1");
  EXPECT_EQ((*rts)[2].kind, "TrainingRuntime");
  EXPECT_EQ((*rts)[2].yaml, "v2");
  auto one = store->GetRuntime("TrainingRuntime", "torch");
  ASSERT_TRUE(one.ok() && one->has_value());
  EXPECT_EQ((*one)->yaml, "v2");
  auto none = store->GetRuntime("TrainingRuntime", "mpi");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
}

TEST_P(JobStoreContractTest, ReopenAfterCloseKeepsEverything) {
  {
    auto store = OpenOrDie();
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(store->CreateJob(Job("one")).ok());
    ASSERT_TRUE(store->CreateJob(Job("two")).ok());
    v1::JobStatus st = Job("two").status;
    st.set_job_phase(v1::JOB_PHASE_FAILED);
    st.add_events()->set_reason("BackoffLimitExceeded");
    ASSERT_TRUE(store->UpdateStatus("two", st).ok());
    ASSERT_TRUE(store->PutRuntime({"ClusterTrainingRuntime", "plain", "y"}).ok());
  }
  auto store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  auto jobs = store->ListJobs();
  ASSERT_TRUE(jobs.ok());
  ASSERT_EQ(jobs->size(), 2u);
  EXPECT_EQ((*jobs)[1].status.job_phase(), v1::JOB_PHASE_FAILED);
  ASSERT_EQ((*jobs)[1].status.events_size(), 1);
  EXPECT_EQ((*jobs)[1].status.events(0).reason(), "BackoffLimitExceeded");
  auto rts = store->ListRuntimes();
  ASSERT_TRUE(rts.ok());
  EXPECT_EQ(rts->size(), 1u);
}

TEST_P(JobStoreContractTest, ClusterValuesAreReplacedKeptApartAndSurviveReopen) {
  {
    auto store = OpenOrDie();
    ASSERT_NE(store, nullptr);
    auto none = store->GetClusterValue("fair-share-history");
    ASSERT_TRUE(none.ok()) << none.status().ToString();
    EXPECT_EQ(*none, "");
    ASSERT_TRUE(store->PutClusterId("the-id").ok());
    ASSERT_TRUE(store->PutClusterValue("fair-share-history", "first").ok());
    ASSERT_TRUE(store->PutClusterValue("fair-share-history", std::string("second\0!", 8)).ok());
    ASSERT_TRUE(store->PutClusterValue("cluster_id", "not the id").ok());
  }
  auto store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(*store->GetClusterValue("fair-share-history"), std::string("second\0!", 8));
  EXPECT_EQ(*store->GetClusterValue("cluster_id"), "not the id");
  EXPECT_EQ(*store->GetClusterId(), "the-id") << "a value named like the id is not the id";
}

// Values kept one key each under a prefix (MissedPurges' tombstones): listed by prefix in key
// order, deleted one by one, kept apart from other prefixes and surviving a reopen.
TEST_P(JobStoreContractTest, ClusterValuesAreListedByPrefixAndDeleted) {
  {
    auto store = OpenOrDie();
    ASSERT_NE(store, nullptr);
    auto none = store->ListClusterValues("missed-purge/");
    ASSERT_TRUE(none.ok()) << none.status().ToString();
    EXPECT_TRUE(none->empty());
    ASSERT_TRUE(store->PutClusterId("the-id").ok());
    ASSERT_TRUE(store->PutClusterValue("missed-purge/n2/b", "2").ok());
    ASSERT_TRUE(store->PutClusterValue("missed-purge/n1/a", "1").ok());
    ASSERT_TRUE(store->PutClusterValue("missed-purge/n2/c", "3").ok());
    ASSERT_TRUE(store->PutClusterValue("missed-purgeX", "not under the prefix").ok());
    ASSERT_TRUE(store->PutClusterValue("fair-share-history", "h").ok());
    ASSERT_TRUE(store->DeleteClusterValue("missed-purge/n2/b").ok());
    ASSERT_TRUE(store->DeleteClusterValue("missed-purge/none").ok()) << "absent: OK";
  }
  auto store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  auto all = store->ListClusterValues("missed-purge/");
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  EXPECT_EQ(*all, (std::vector<std::pair<std::string, std::string>>{{"missed-purge/n1/a", "1"},
                                                                    {"missed-purge/n2/c", "3"}}));
  auto n2 = store->ListClusterValues("missed-purge/n2/");
  ASSERT_TRUE(n2.ok());
  EXPECT_EQ(n2->size(), 1u);
  EXPECT_EQ(*store->GetClusterValue("missed-purge/n2/b"), "");
  EXPECT_EQ(*store->GetClusterValue("fair-share-history"), "h");
  EXPECT_EQ(*store->GetClusterId(), "the-id");
}

TEST_P(JobStoreContractTest, CommittedWritesAreVisibleToAnotherConnectionAtOnce) {
  // What a crash right after the ack would leave: another reader sees the write without this
  // store closing or checkpointing.
  auto store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->CreateJob(Job("durable")).ok());
  auto second = OpenOrDie();
  ASSERT_NE(second, nullptr);
  auto got = second->GetJob("durable");
  ASSERT_TRUE(got.ok() && got->has_value());
}

TEST_P(JobStoreContractTest, TransactionCommitsAllOrNothing) {
  auto store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->CreateJob(Job("existing")).ok());

  Status st = store->Transaction([&]() -> Status {
    TRAINLET_RETURN_IF_ERROR(store->CreateJob(Job("new1")));
    TRAINLET_RETURN_IF_ERROR(store->PutRuntime({"TrainingRuntime", "rt", "y"}));
    TRAINLET_RETURN_IF_ERROR(store->CreateJob(Job("existing")));  // fails: kExists
    return Status::Ok();
  });
  EXPECT_EQ(st.code(), ErrorCode::kExists);
  auto jobs = store->ListJobs();
  ASSERT_TRUE(jobs.ok());
  ASSERT_EQ(jobs->size(), 1u);
  EXPECT_EQ((*jobs)[0].name, "existing");
  auto rts = store->ListRuntimes();
  ASSERT_TRUE(rts.ok());
  EXPECT_TRUE(rts->empty());

  ASSERT_TRUE(store
                  ->Transaction([&]() -> Status {
                    TRAINLET_RETURN_IF_ERROR(store->CreateJob(Job("new1")));
                    return store->PutRuntime({"TrainingRuntime", "rt", "y"});
                  })
                  .ok());
  jobs = store->ListJobs();
  ASSERT_TRUE(jobs.ok());
  EXPECT_EQ(jobs->size(), 2u);
  // And the store is usable outside a transaction again.
  ASSERT_TRUE(store->CreateJob(Job("after")).ok());
}

TEST_P(JobStoreContractTest, NestedTransactionFailureRollsBackOnlyTheInnerPart) {
  auto store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  Status st = store->Transaction([&]() -> Status {
    TRAINLET_RETURN_IF_ERROR(store->CreateJob(Job("outer")));
    Status inner = store->Transaction([&]() -> Status {
      TRAINLET_RETURN_IF_ERROR(store->CreateJob(Job("inner")));
      return InvalidError("inner refused");
    });
    EXPECT_EQ(inner.message(), "inner refused");
    return Status::Ok();
  });
  ASSERT_TRUE(st.ok()) << st.ToString();
  auto jobs = store->ListJobs();
  ASSERT_TRUE(jobs.ok());
  ASSERT_EQ(jobs->size(), 1u);
  EXPECT_EQ((*jobs)[0].name, "outer");
}

TEST_P(JobStoreContractTest, TransactionRollsBackWhenTheBodyThrows) {
  auto store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  EXPECT_THROW((void)store->Transaction([&]() -> Status {
    (void)store->CreateJob(Job("half"));
    throw std::runtime_error("boom");
  }),
               std::runtime_error);
  auto got = store->GetJob("half");
  ASSERT_TRUE(got.ok());
  EXPECT_FALSE(got->has_value());
  ASSERT_TRUE(store->CreateJob(Job("next")).ok());
}

TEST_F(JobStoreTest, StateDirUnderARegularFileIsAClearError) {
  std::string file = root_ + "/plainfile";
  std::ofstream(file) << "x";
  auto store = SqliteJobStore::Open(file + "/sub");
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), ErrorCode::kIo);
  EXPECT_NE(store.status().message().find(file + "/sub"), std::string::npos)
      << store.status().message();

  // The state dir itself being a file.
  store = SqliteJobStore::Open(file);
  ASSERT_FALSE(store.ok());
  EXPECT_NE(store.status().message().find("ot a directory"), std::string::npos)
      << store.status().message();
}

TEST_F(JobStoreTest, ReadOnlyStateDirIsAClearError) {
  if (geteuid() == 0) GTEST_SKIP() << "root ignores directory permissions";
  fs::create_directories(dir_);
  fs::permissions(dir_, fs::perms::owner_read | fs::perms::owner_exec);
  auto store = SqliteJobStore::Open(dir_);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), ErrorCode::kIo);
  EXPECT_EQ(store.status().message(), "state dir " + dir_ + ": not writable: Permission denied");
}

TEST_F(JobStoreTest, GarbageDatabaseIsAnErrorNotACrash) {
  fs::create_directories(dir_);
  {
    std::ofstream f(dir_ + "/trainlet.db", std::ios::binary);
    for (int i = 0; i < 4096; ++i) f.put(static_cast<char>((i * 131 + 7) & 0xff));
  }
  auto store = SqliteJobStore::Open(dir_);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), ErrorCode::kIo);
  EXPECT_NE(store.status().message().find(dir_ + "/trainlet.db"), std::string::npos);
  EXPECT_NE(store.status().message().find("not a database"), std::string::npos)
      << store.status().message();
}

TEST_F(JobStoreTest, CorruptStatusBlobIsAnErrorNamingTheJob) {
  {
    auto store = OpenOrDie();
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(store->CreateJob(Job("bad")).ok());
  }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((dir_ + "/trainlet.db").c_str(), &db), SQLITE_OK);
  // 0xff is an invalid protobuf tag (field 31, wire type 7).
  ASSERT_EQ(sqlite3_exec(db, "UPDATE jobs SET status = x'ffffffff'", nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);

  auto store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  auto got = store->GetJob("bad");
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.status().message().find("trainjob/bad"), std::string::npos);
  auto all = store->ListJobs();
  EXPECT_FALSE(all.ok());
}

TEST_F(JobStoreTest, NewerSchemaIsRefused) {
  {
    auto store = OpenOrDie();
    ASSERT_NE(store, nullptr);
  }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((dir_ + "/trainlet.db").c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "PRAGMA user_version = 99", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  auto store = SqliteJobStore::Open(dir_);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), ErrorCode::kInvalid);
  EXPECT_NE(store.status().message().find("version 99"), std::string::npos)
      << store.status().message();
  EXPECT_NE(store.status().message().find("newer trainlet"), std::string::npos);
}

// A record as trainlet wrote it before the states were enums: strings only. The store writes
// whatever status it is given, so this is byte for byte what such a database holds.
JobRecord OldRecord(const std::string& name, const std::string& rank1_state) {
  JobRecord j;
  j.name = name;
  j.spec_yaml = "kind: TrainJob\n";
  j.runtime_kind = "ClusterTrainingRuntime";
  j.runtime_name = "plain";
  j.runtime_yaml = "kind: ClusterTrainingRuntime\n";
  j.status.set_name(name);
  j.status.set_phase("Restarting");
  j.status.set_attempt(2);
  auto* r0 = j.status.add_ranks();
  r0->set_rank(0);
  r0->set_state("Stopped");
  auto* r1 = j.status.add_ranks();
  r1->set_rank(1);
  r1->set_state(rank1_state);
  j.status.add_attempts()->set_result("Failed");
  j.status.add_attempts()->set_attempt(2);  // "" : still running
  return j;
}

TEST_P(JobStoreContractTest, OldRecordWithStringStatesLoadsTyped) {
  auto store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->CreateJob(OldRecord("old", "Lost")).ok());
  auto got = store->GetJob("old");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_TRUE(got->has_value());
  const v1::JobStatus& st = (*got)->status;
  EXPECT_EQ(st.job_phase(), v1::JOB_PHASE_RESTARTING);
  EXPECT_EQ(st.ranks(0).rank_state(), v1::RANK_STATE_STOPPED);
  EXPECT_EQ(st.ranks(1).rank_state(), v1::RANK_STATE_LOST);
  EXPECT_EQ(st.attempts(0).attempt_result(), v1::ATTEMPT_RESULT_FAILED);
  EXPECT_EQ(st.attempts(1).attempt_result(), v1::ATTEMPT_RESULT_UNSPECIFIED);
  // Nothing past the store sees the strings.
  EXPECT_EQ(st.phase(), "");
  EXPECT_EQ(st.ranks(1).state(), "");
  EXPECT_EQ(st.attempts(0).result(), "");

  // Written back, it is written typed.
  ASSERT_TRUE(store->UpdateStatus("old", st).ok());
  auto again = store->GetJob("old");
  ASSERT_TRUE(again.ok() && again->has_value());
  EXPECT_EQ((*again)->status.SerializeAsString(), st.SerializeAsString());
}

TEST_P(JobStoreContractTest, CorruptStateStringIsAnErrorNamingJobAndValue) {
  auto store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->CreateJob(OldRecord("bad", "Exploded")).ok());
  auto got = store->GetJob("bad");
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), ErrorCode::kIo);
  EXPECT_NE(got.status().message().find("trainjob/bad"), std::string::npos)
      << got.status().message();
  EXPECT_NE(got.status().message().find("\"Exploded\""), std::string::npos)
      << got.status().message();
  auto all = store->ListJobs();
  EXPECT_FALSE(all.ok());

  JobRecord phase = OldRecord("badphase", "Running");
  phase.status.set_phase("Runing");
  ASSERT_TRUE(store->CreateJob(phase).ok());
  auto p = store->GetJob("badphase");
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("\"Runing\""), std::string::npos) << p.status().message();
}

}  // namespace
}  // namespace trainlet::coordinator

namespace trainlet::coordinator {
namespace {

// Kueue's queue objects (issue 14): kept by (kind, namespace, name), replaced by a re-apply.
TEST_P(JobStoreContractTest, QueueObjectsUpsertListAndDelete) {
  auto store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->PutQueueObject({"LocalQueue", "team-a", "q", "cq: a"}).ok());
  ASSERT_TRUE(store->PutQueueObject({"ClusterQueue", "", "a", "v1"}).ok());
  ASSERT_TRUE(store->PutQueueObject({"LocalQueue", "default", "q", "cq: b"}).ok());
  ASSERT_TRUE(store->PutQueueObject({"ClusterQueue", "", "a", "v2"}).ok());  // replaces
  auto all = store->ListQueueObjects();
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ((*all)[0], (QueueObjectRecord{"ClusterQueue", "", "a", "v2"}));
  EXPECT_EQ((*all)[1], (QueueObjectRecord{"LocalQueue", "default", "q", "cq: b"}));
  EXPECT_EQ((*all)[2], (QueueObjectRecord{"LocalQueue", "team-a", "q", "cq: a"}));
  ASSERT_TRUE(store->DeleteQueueObject("LocalQueue", "default", "q").ok());
  Status missing = store->DeleteQueueObject("LocalQueue", "default", "q");
  EXPECT_EQ(missing.code(), ErrorCode::kNotFound) << missing.ToString();
  EXPECT_NE(missing.message().find("LocalQueue/q not found"), std::string::npos)
      << missing.message();
  all = store->ListQueueObjects();
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), 2u);
}

TEST_P(JobStoreContractTest, QueueObjectsSurviveReopen) {
  {
    auto store = OpenOrDie();
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(store->PutQueueObject({"WorkloadPriorityClass", "", "high", "value: 1000"}).ok());
  }
  auto store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  auto all = store->ListQueueObjects();
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 1u);
  EXPECT_EQ((*all)[0].yaml, "value: 1000");
}

// One apply is one transaction: a queue object is not stored when a job of the same file fails.
TEST_P(JobStoreContractTest, QueueObjectsCommitWithTheJobsOrNotAtAll) {
  auto store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->CreateJob(Job("taken")).ok());
  Status s = store->Transaction([&]() -> Status {
    TRAINLET_RETURN_IF_ERROR(store->PutQueueObject({"ClusterQueue", "", "cq", "y"}));
    return store->CreateJob(Job("taken"));
  });
  EXPECT_EQ(s.code(), ErrorCode::kExists) << s.ToString();
  auto all = store->ListQueueObjects();
  ASSERT_TRUE(all.ok());
  EXPECT_TRUE(all->empty());
  // And inside a transaction, a read sees the transaction's own writes.
  ASSERT_TRUE(
      store
          ->Transaction([&]() -> Status {
            TRAINLET_RETURN_IF_ERROR(store->PutQueueObject({"ClusterQueue", "", "cq", "y"}));
            auto inside = store->ListQueueObjects();
            EXPECT_TRUE(inside.ok() && inside->size() == 1u);
            return store->DeleteQueueObject("ClusterQueue", "", "cq");
          })
          .ok());
  all = store->ListQueueObjects();
  ASSERT_TRUE(all.ok());
  EXPECT_TRUE(all->empty());
}

// A version-2 database (before queue objects) gains the table and keeps its jobs.
TEST_F(JobStoreTest, VersionTwoDatabaseMigratesToQueueObjects) {
  {
    auto store = OpenOrDie();
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(store->CreateJob(Job("kept")).ok());
  }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((dir_ + "/trainlet.db").c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "DROP TABLE queue_objects; PRAGMA user_version = 2", nullptr, nullptr,
                         nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  auto store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->PutQueueObject({"ResourceFlavor", "", "f", "y"}).ok());
  auto jobs = store->ListJobs();
  ASSERT_TRUE(jobs.ok());
  EXPECT_EQ(jobs->size(), 1u);
}

}  // namespace
}  // namespace trainlet::coordinator
