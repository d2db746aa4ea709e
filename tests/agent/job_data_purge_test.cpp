// JobDataPurge (agent/job_data_purge.h) on a temp state dir: a deleted job's logs and work dir
// go, other jobs' stay; nothing goes while a worker of the job runs; a new plan of its name moves
// an older job's data aside; names that are not job keys are refused.
#include "agent/job_data_purge.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "tests/common/test_dir.h"

namespace trainlet::agent {
namespace {

namespace fs = std::filesystem;

class JobDataPurgeTest : public ::testing::Test {
 protected:
  void MakeJob(const std::string& job) {
    fs::create_directories(dir_.path() + "/logs/" + job + "/attempt-1");
    std::ofstream(dir_.path() + "/logs/" + job + "/attempt-1/rank-0.log") << "old output\n";
    fs::create_directories(dir_.path() + "/work/" + job + "/workspace");
    std::ofstream(dir_.path() + "/work/" + job + "/workspace/ckpt") << "state";
  }
  bool Has(const std::string& job) const {
    return fs::exists(dir_.path() + "/logs/" + job) || fs::exists(dir_.path() + "/work/" + job);
  }

  testing::TempDir dir_;
  std::set<std::string> running_;
  JobDataPurge purge_{dir_.path(),
                      [this](const std::string& job) { return running_.contains(job); }};
};

TEST_F(JobDataPurgeTest, RemovesTheJobsLogsAndWorkDirOnly) {
  MakeJob("a");
  MakeJob("ab");
  MakeJob("team.a");
  ASSERT_TRUE(purge_.Request("a").ok());
  EXPECT_FALSE(Has("a"));
  EXPECT_TRUE(Has("ab"));
  EXPECT_TRUE(Has("team.a"));
  EXPECT_TRUE(fs::exists(dir_.path() + "/logs"));
  EXPECT_FALSE(purge_.pending());
  EXPECT_TRUE(purge_.Request("gone").ok());  // nothing there: nothing to do
}

TEST_F(JobDataPurgeTest, WaitsWhileAWorkerOfTheJobRuns) {
  MakeJob("a");
  running_.insert("a");
  ASSERT_TRUE(purge_.Request("a").ok());
  EXPECT_TRUE(Has("a"));
  EXPECT_TRUE(purge_.pending());
  purge_.Poll();
  EXPECT_TRUE(Has("a"));
  running_.clear();
  purge_.Poll();
  EXPECT_FALSE(Has("a"));
  EXPECT_FALSE(purge_.pending());
}

TEST_F(JobDataPurgeTest, ANewPlanOfTheNameCancelsAWaitingPurge) {
  MakeJob("a");
  running_.insert("a");
  ASSERT_TRUE(purge_.Request("a").ok());
  purge_.Cancel("a");
  running_.clear();
  purge_.Poll();
  EXPECT_TRUE(Has("a"));
  EXPECT_FALSE(purge_.pending());
}

// Issue 19: incarnations. A plan of a new UID finding data stamped with an older one (a purge
// this node missed) removes it before its ranks start; today's main kept it, so a job applied
// again under the name saw the old one's output and files.
TEST_F(JobDataPurgeTest, APlanOfANewIncarnationRemovesDataAPurgeMissed) {
  MakeJob("a");
  ASSERT_TRUE(purge_.OnPlan("a", "uid-1").ok());
  EXPECT_EQ(purge_.StampOf("a"), "uid-1");
  EXPECT_TRUE(fs::exists(dir_.path() + "/work/a/workspace/ckpt"));  // unstamped: adopted
  ASSERT_TRUE(purge_.OnPlan("a", "uid-1").ok());                    // the same one: kept
  EXPECT_TRUE(fs::exists(dir_.path() + "/logs/a/attempt-1/rank-0.log"));
  // The job is deleted while this node is away (no purge), and applied again.
  ASSERT_TRUE(purge_.OnPlan("a", "uid-2").ok());
  EXPECT_FALSE(fs::exists(dir_.path() + "/logs/a/attempt-1/rank-0.log"));
  EXPECT_FALSE(fs::exists(dir_.path() + "/work/a/workspace/ckpt"));
  EXPECT_EQ(purge_.StampOf("a"), "uid-2");
  // A plan from a coordinator before UIDs changes nothing.
  MakeJob("a");
  ASSERT_TRUE(purge_.OnPlan("a", "").ok());
  EXPECT_TRUE(Has("a"));
  EXPECT_EQ(purge_.StampOf("a"), "uid-2");
}

// Something of the old incarnation still runs (its step sweeping up after a delete that an apply
// followed at once, or its ranks after a delete --force): its data moves aside, the new job starts
// without it, and it goes once nothing of the name runs. Before, the new job adopted it: its
// `logs` showed the deleted job's output, and its ranks saw the old files.
TEST_F(JobDataPurgeTest, AnOldIncarnationStillRunningHasItsDataMovedAside) {
  MakeJob("a");
  ASSERT_TRUE(purge_.OnPlan("a", "uid-1").ok());
  running_.insert("a");
  ASSERT_TRUE(purge_.Request("a", "uid-1").ok());  // waits: a worker of it runs
  ASSERT_TRUE(purge_.OnPlan("a", "uid-2").ok());
  EXPECT_EQ(purge_.StampOf("a"), "uid-2");
  EXPECT_FALSE(fs::exists(dir_.path() + "/logs/a/attempt-1/rank-0.log"));
  EXPECT_FALSE(fs::exists(dir_.path() + "/work/a"));
  const std::string grave = purge_.GravePath("a", "uid-1");
  EXPECT_TRUE(fs::exists(grave + "/logs/attempt-1/rank-0.log"));
  EXPECT_TRUE(fs::exists(grave + "/work/workspace/ckpt"));
  EXPECT_EQ(fs::status(dir_.path() + "/purging").permissions() & fs::perms::all,
            fs::perms::owner_all);
  EXPECT_TRUE(purge_.pending());
  purge_.Poll();
  EXPECT_TRUE(fs::exists(grave));  // a worker of the name still runs
  // An agent started again finds the grave, and removes it in its turn.
  JobDataPurge again(dir_.path(),
                     [this](const std::string& job) { return running_.contains(job); });
  EXPECT_TRUE(again.pending());
  running_.clear();
  again.Poll();
  EXPECT_FALSE(fs::exists(grave));
  EXPECT_FALSE(again.pending());
  purge_.Poll();  // already gone: nothing to do
  EXPECT_FALSE(purge_.pending());
  EXPECT_EQ(purge_.StampOf("a"), "uid-2");  // the new job's data stays
}

// The stamp comes from a file a rank running as the agent's user could write: it never makes the
// grave a path outside purging/, which Poll would remove whole.
TEST_F(JobDataPurgeTest, AStampThatIsNotAUidNamesNoPath) {
  EXPECT_EQ(purge_.GravePath("a", "../../../etc"), dir_.path() + "/purging/a.unnamed");
  EXPECT_EQ(purge_.GravePath("a", "x/y"), dir_.path() + "/purging/a.unnamed");
  EXPECT_EQ(purge_.GravePath("a", ""), dir_.path() + "/purging/a.unnamed");
  EXPECT_EQ(purge_.GravePath("a", std::string(65, 'f')), dir_.path() + "/purging/a.unnamed");
  EXPECT_EQ(purge_.GravePath("a", "7bcc33aee3d74d32"), dir_.path() + "/purging/a.7bcc33aee3d74d32");
  MakeJob("a");
  ASSERT_TRUE(purge_.OnPlan("a", "uid-1").ok());
  std::ofstream(dir_.path() + "/logs/a/.trainlet-uid") << "../../../victim\n";
  fs::create_directories(dir_.path() + "/victim/keep");
  running_.insert("a");
  ASSERT_TRUE(purge_.OnPlan("a", "uid-2").ok());
  EXPECT_TRUE(fs::exists(dir_.path() + "/purging/a.unnamed/work/workspace/ckpt"));
  running_.clear();
  purge_.Poll();
  EXPECT_FALSE(fs::exists(dir_.path() + "/purging/a.unnamed"));
  EXPECT_TRUE(fs::exists(dir_.path() + "/victim/keep"));
}

TEST_F(JobDataPurgeTest, APurgeOfAnotherIncarnationKeepsTheData) {
  MakeJob("a");
  ASSERT_TRUE(purge_.OnPlan("a", "uid-2").ok());
  ASSERT_TRUE(purge_.Request("a", "uid-1").ok());  // a late purge of the one before
  EXPECT_TRUE(Has("a"));
  ASSERT_TRUE(purge_.Request("a", "uid-2").ok());
  EXPECT_FALSE(Has("a"));
}

TEST_F(JobDataPurgeTest, RefusesNamesThatAreNotJobKeys) {
  MakeJob("a");
  fs::create_directories(dir_.path() + "/keep");
  for (const std::string bad :
       {"", "..", "../keep", "a/..", "logs/../keep", ".a", "a..b", "A", "a b", "/etc"}) {
    EXPECT_FALSE(purge_.Request(bad).ok()) << bad;
  }
  EXPECT_TRUE(Has("a"));
  EXPECT_TRUE(fs::exists(dir_.path() + "/keep"));
  EXPECT_TRUE(IsJobKey("team-a.llm-7"));
  EXPECT_FALSE(IsJobKey(std::string(254, 'a')));
}

// Issue 18: the shared directory (<shared_dir>/<job>, the same on every node) goes with the job,
// on the one node whose PurgeJob says so, and never when a newer incarnation's plan stamped it.
class SharedDirPurgeTest : public ::testing::Test {
 protected:
  SharedDirPurgeTest() { fs::create_directories(shared_.path() + "/nfs"); }
  std::string Shared(const std::string& job) const { return shared_.path() + "/nfs/" + job; }
  void MakeShared(const std::string& job) {
    fs::create_directories(Shared(job));
    std::ofstream(Shared(job) + "/ckpt") << "epoch 10";
  }
  JobDataPurge Node(const std::string& name) {
    fs::create_directories(state_.path() + "/" + name);
    return JobDataPurge(state_.path() + "/" + name, shared_.path() + "/nfs",
                        [](const std::string&) { return false; });
  }

  testing::TempDir state_, shared_;
};

TEST_F(SharedDirPurgeTest, TheOwnerRemovesTheSharedDirectoryOfItsIncarnation) {
  JobDataPurge a = Node("a"), b = Node("b");
  ASSERT_TRUE(a.OnPlan("j", "uid-1", /*shared=*/true).ok());
  ASSERT_TRUE(b.OnPlan("j", "uid-1", /*shared=*/true).ok());
  MakeShared("j");
  MakeShared("k");
  EXPECT_EQ(b.SharedStampOf("j"), "uid-1");
  // Today's main left <shared_dir>/j behind on every delete.
  ASSERT_TRUE(b.Request("j", "uid-1", /*shared=*/false).ok());  // not the owner
  EXPECT_TRUE(fs::exists(Shared("j") + "/ckpt"));
  v1::PurgeJob purge;
  purge.set_job("j");
  purge.set_uid("uid-1");
  purge.set_shared_dir(true);
  ASSERT_TRUE(a.Request(purge).ok());
  EXPECT_FALSE(fs::exists(Shared("j")));
  EXPECT_EQ(a.SharedStampOf("j"), "");
  EXPECT_TRUE(fs::exists(Shared("k") + "/ckpt"));
}

TEST_F(SharedDirPurgeTest, ANewerIncarnationsDirectoryIsNeverRemoved) {
  JobDataPurge a = Node("a"), b = Node("b");
  ASSERT_TRUE(a.OnPlan("j", "uid-1", true).ok());
  MakeShared("j");
  // j is deleted while its owner (a) is away, and applied again: b runs the new one.
  ASSERT_TRUE(b.OnPlan("j", "uid-2", true).ok());
  std::ofstream(Shared("j") + "/new") << "new job's";
  // a comes back and gets the late purge of uid-1.
  ASSERT_TRUE(a.Request("j", "uid-1", true).ok());
  EXPECT_TRUE(fs::exists(Shared("j") + "/new"));
  EXPECT_EQ(a.SharedStampOf("j"), "uid-2");
}

TEST_F(SharedDirPurgeTest, ANodeWithoutASharedDirIgnoresIt) {
  MakeShared("j");
  fs::create_directories(state_.path() + "/plain");
  JobDataPurge plain(state_.path() + "/plain", [](const std::string&) { return false; });
  ASSERT_TRUE(plain.OnPlan("j", "uid-1", true).ok());
  ASSERT_TRUE(plain.Request("j", "uid-1", true).ok());
  EXPECT_TRUE(fs::exists(Shared("j") + "/ckpt"));
}

}  // namespace
}  // namespace trainlet::agent
