// Replicated jobs in order under a real trainlet-step: a rank whose replicated job depends on an
// initializer is held (pid 0) until the initializer completed on this node, never started when
// it failed, and released as never started when the step is stopped first.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "agent/process_spawner.h"
#include "agent/worker_supervisor.h"
#include "tests/common/supervisor_fixture.h"

namespace trainlet::agent {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

class StepOrderTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { testing::BlockAgentSignals(); }

  void SetUp() override {
    char tmpl[] = "/tmp/trainlet-step-order-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = fs::canonical(tmpl);
    sup_ = std::make_unique<WorkerSupervisor>(
        posix_.get(), std::vector<std::string>{"PATH=/usr/bin:/bin", "LANG=C"},
        testing::StepOptionsUnder(dir_));
  }

  void TearDown() override {
    sup_->KillAllAndWait(5s);
    EXPECT_EQ(sup_->running(), 0u);
    sup_.reset();
    const auto deadline = Clock::now() + 5s;
    while (Clock::now() < deadline) {
      const pid_t p = waitpid(-1, nullptr, WNOHANG);
      if (p < 0) break;
      if (p == 0) std::this_thread::sleep_for(2ms);
    }
    fs::remove_all(dir_);
  }

  WorkerLaunch Launch(const std::string& script, uint32_t rank, const std::string& step) {
    WorkerLaunch l;
    l.job = "job-a";
    l.attempt = 1;
    l.rank = rank;
    l.argv = {"/bin/sh", "-c", script};
    l.cwd = dir_.string();
    l.log_path = (dir_ / "logs" / ("rank-" + std::to_string(rank) + ".log")).string();
    l.step = step;
    if (step.empty()) l.waits = {{"dataset-initializer", "Complete"}};
    return l;
  }

  // Reaps until `n` exits came, collecting the late starts on the way (before the exits of the
  // same Reap, as the agent reports them).
  std::vector<WorkerExit> WaitExits(size_t n, std::vector<LateStart>* late) {
    std::vector<WorkerExit> all;
    const auto deadline = Clock::now() + 15s;
    while (all.size() < n && Clock::now() < deadline) {
      for (auto& e : sup_->Reap()) all.push_back(e);
      for (auto& l : sup_->TakeLateStarts()) late->push_back(l);
      if (all.size() < n) std::this_thread::sleep_for(5ms);
    }
    return all;
  }

  fs::path dir_;
  std::unique_ptr<ProcessSpawner> posix_ = MakePosixProcessSpawner();
  std::unique_ptr<WorkerSupervisor> sup_;
};

TEST_F(StepOrderTest, TheMainRankStartsOnceTheInitializerCompleted) {
  auto started =
      sup_->StartStep({Launch("test -f ready || exit 7; echo trained", 0, ""),
                       Launch("sleep 0.3; echo fetched > ready", 1, "dataset-initializer")},
                      1s);
  ASSERT_EQ(started.size(), 2u);
  ASSERT_TRUE(started[0].ok()) << started[0].status().message();
  EXPECT_EQ(*started[0], 0);  // held
  ASSERT_TRUE(started[1].ok());
  EXPECT_GT(*started[1], 0);
  EXPECT_EQ(sup_->running(), 2u);  // the held rank counts: the attempt has not ended here
  EXPECT_TRUE(sup_->IsRunning("job-a", 1, 0));
  EXPECT_EQ(sup_->Running().size(), 1u);  // but is not reported as a running process

  std::vector<LateStart> late;
  auto exits = WaitExits(2, &late);
  ASSERT_EQ(exits.size(), 2u);
  EXPECT_EQ(exits[0].rank, 1u);  // the initializer first
  EXPECT_EQ(exits[0].exit_code, 0);
  EXPECT_EQ(exits[1].rank, 0u);
  EXPECT_EQ(exits[1].exit_code, 0) << "the main rank did not find the initializer's file";
  EXPECT_TRUE(exits[1].started);
  ASSERT_EQ(late.size(), 1u);
  EXPECT_EQ(late[0].rank, 0u);
  EXPECT_GT(late[0].pid, 0);
}

TEST_F(StepOrderTest, AFailedInitializerMeansTheMainRankNeverStarts) {
  auto started = sup_->StartStep(
      {Launch("echo should not run; exit 0", 0, ""), Launch("exit 3", 1, "dataset-initializer")},
      1s);
  ASSERT_TRUE(started[0].ok());
  EXPECT_EQ(*started[0], 0);
  std::vector<LateStart> late;
  auto exits = WaitExits(2, &late);
  ASSERT_EQ(exits.size(), 2u);
  EXPECT_EQ(exits[0].rank, 1u);
  EXPECT_EQ(exits[0].exit_code, 3);
  EXPECT_EQ(exits[1].rank, 0u);
  EXPECT_FALSE(exits[1].started);
  EXPECT_EQ(exits[1].message, "not started: dependency dataset-initializer failed");
  EXPECT_TRUE(late.empty());
  EXPECT_FALSE(fs::exists(dir_ / "logs" / "rank-0.log") &&
               fs::file_size(dir_ / "logs" / "rank-0.log") > 0);
}

TEST_F(StepOrderTest, AStopReleasesTheHeldRankSoTheStepEnds) {
  auto started =
      sup_->StartStep({Launch("exit 0", 0, ""), Launch("sleep 30", 1, "dataset-initializer")}, 1s);
  ASSERT_TRUE(started[1].ok());
  sup_->Stop("job-a", 1, 2s, Clock::now());
  std::vector<LateStart> late;
  auto exits = WaitExits(2, &late);
  ASSERT_EQ(exits.size(), 2u);
  std::sort(exits.begin(), exits.end(),
            [](const auto& a, const auto& b) { return a.rank < b.rank; });
  EXPECT_FALSE(exits[0].started);
  EXPECT_EQ(exits[0].message, "not started: stopped before its dependencies were met");
  EXPECT_EQ(exits[1].signal, SIGTERM);
  EXPECT_TRUE(late.empty());
  EXPECT_EQ(sup_->running(), 0u);
}

// A restarted agent adopts a step whose rank is still held: it counts as running again, and its
// start, once the initializer is done, comes from the new supervisor (launch.json is the step's
// whole input, the gating goes on in the step itself).
TEST_F(StepOrderTest, AnAdoptedStepStillHoldsAndStartsItsWaitingRank) {
  auto started = sup_->StartStep({Launch("test -f ready || exit 7", 0, ""),
                                  Launch("sleep 0.8; : > ready", 1, "dataset-initializer")},
                                 1s);
  ASSERT_TRUE(started[0].ok());
  EXPECT_EQ(*started[0], 0);
  sup_.reset();  // the agent goes away; the step and its ranks run on
  sup_ = std::make_unique<WorkerSupervisor>(
      posix_.get(), std::vector<std::string>{"PATH=/usr/bin:/bin", "LANG=C"},
      testing::StepOptionsUnder(dir_));
  auto adopted = sup_->AdoptSteps();
  ASSERT_EQ(adopted.size(), 1u);
  EXPECT_EQ(adopted[0].running, 2u);  // the initializer, and the rank it holds
  EXPECT_TRUE(sup_->IsRunning("job-a", 1, 0));
  std::vector<LateStart> late;
  auto exits = WaitExits(2, &late);
  ASSERT_EQ(exits.size(), 2u);
  EXPECT_EQ(exits[0].rank, 1u);
  EXPECT_EQ(exits[1].rank, 0u);
  EXPECT_EQ(exits[1].exit_code, 0);
  ASSERT_EQ(late.size(), 1u);
  EXPECT_EQ(late[0].rank, 0u);
}

}  // namespace
}  // namespace trainlet::agent
