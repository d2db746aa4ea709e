// The WorkerEvents a node sends about its ranks (agent/rank_reports.h), without an agent: what a
// start, a held rank's late start, a start that never came and a failed exit each carry.
#include "agent/rank_reports.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <vector>

#include "tests/common/fake_env.h"

namespace trainlet::agent {
namespace {

namespace fs = std::filesystem;

class RankReportsTest : public ::testing::Test {
 protected:
  RankReportsTest()
      : dir_(fs::temp_directory_path() / ("rank-reports-" + std::to_string(::getpid()))),
        supervisor_(&env_.spawner(), {}),
        rendezvous_("node-a", dir_.string(), [](v1::Envelope) {}) {
    fs::create_directories(dir_);
    auto ops = AgentOps::Create("", false, "node-a", MakeSystemdNotifier(), &drops_);
    EXPECT_TRUE(ops.ok()) << ops.status().message();
    ops_ = std::move(*ops);
    reports_ = std::make_unique<RankReports>(RankReports::Deps{
        "node-a", &env_, ops_.get(), &supervisor_, &rendezvous_, &cpus_,
        [this](v1::Envelope e) { sent_.push_back(std::move(e.worker_event())); },
        [this](const std::string& job, uint32_t attempt, uint32_t rank) {
          return (dir_ / (job + "-" + std::to_string(attempt) + "-" + std::to_string(rank)))
              .string();
        }});
  }
  ~RankReportsTest() override { fs::remove_all(dir_); }

  fs::path dir_;
  testing::FakeEnv env_;
  DropCounters drops_;
  std::unique_ptr<AgentOps> ops_;
  WorkerSupervisor supervisor_;
  RendezvousServer rendezvous_;
  CpuAllotment cpus_;
  std::vector<v1::WorkerEvent> sent_;
  std::unique_ptr<RankReports> reports_;
};

TEST_F(RankReportsTest, AStartCarriesWhatTheRankGot) {
  RankBinding b;
  b.cpus = {2, 3};
  reports_->Started("j", 1, 4, "/work/j", b, Result<pid_t>(pid_t{77}));
  ASSERT_EQ(sent_.size(), 1u);
  EXPECT_EQ(sent_[0].kind(), v1::WorkerEvent::KIND_STARTED);
  EXPECT_EQ(sent_[0].node(), "node-a");
  EXPECT_EQ(sent_[0].pid(), 77);
  EXPECT_EQ(sent_[0].cpuset(), "2-3");
  EXPECT_EQ(sent_[0].cwd(), "/work/j");
  EXPECT_EQ(sent_[0].unix_ms(), env_.WallUnixMs());

  reports_->Started("j", 1, 5, "", std::nullopt, Result<pid_t>(InvalidError("no such program")));
  ASSERT_EQ(sent_.size(), 2u);
  EXPECT_EQ(sent_[1].kind(), v1::WorkerEvent::KIND_START_FAILED);
  EXPECT_EQ(sent_[1].message(), "no such program");
}

TEST_F(RankReportsTest, AHeldRankIsReportedWithItsBindingAndDirWhenItStarts) {
  RankBinding b;
  b.cpus = {1};
  reports_->Hold("j", 2, 3, "/work/j/sub", b);
  EXPECT_TRUE(sent_.empty());
  EXPECT_EQ(reports_->held(), 1u);
  reports_->LateStarted(LateStart{"j", 2, 3, 99});
  ASSERT_EQ(sent_.size(), 1u);
  EXPECT_EQ(sent_[0].kind(), v1::WorkerEvent::KIND_STARTED);
  EXPECT_EQ(sent_[0].pid(), 99);
  EXPECT_EQ(sent_[0].cpuset(), "1");
  EXPECT_EQ(sent_[0].cwd(), "/work/j/sub");
  EXPECT_EQ(reports_->held(), 0u);
}

TEST_F(RankReportsTest, AHeldRankThatNeverStartedIsAStartFailure) {
  reports_->Hold("j", 1, 3, "/w", std::nullopt);
  WorkerExit e;
  e.job = "j";
  e.attempt = 1;
  e.rank = 3;
  e.started = false;
  e.message = "dependency dataset-initializer failed";
  reports_->Exited(e);
  ASSERT_EQ(sent_.size(), 1u);
  EXPECT_EQ(sent_[0].kind(), v1::WorkerEvent::KIND_START_FAILED);
  EXPECT_EQ(sent_[0].message(), "dependency dataset-initializer failed");
  EXPECT_EQ(reports_->held(), 0u);
}

TEST_F(RankReportsTest, AFailedExitCarriesTheLastLineOfItsLog) {
  std::ofstream(dir_ / "j-1-0") << "loading\nValueError: bad shape\n\n";
  WorkerExit e;
  e.job = "j";
  e.attempt = 1;
  e.rank = 0;
  e.pid = 10;
  e.exit_code = 3;
  reports_->Exited(e);
  ASSERT_EQ(sent_.size(), 1u);
  EXPECT_EQ(sent_[0].kind(), v1::WorkerEvent::KIND_EXITED);
  EXPECT_EQ(sent_[0].exit_code(), 3);
  EXPECT_EQ(sent_[0].message(), "ValueError: bad shape");

  e.exit_code = 0;  // a clean exit says nothing
  reports_->Exited(e);
  ASSERT_EQ(sent_.size(), 2u);
  EXPECT_EQ(sent_[1].message(), "");
}

}  // namespace
}  // namespace trainlet::agent
