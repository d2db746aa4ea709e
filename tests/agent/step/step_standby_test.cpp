// A standby trainlet-step (agent/step/step_standby.h, agent/standby_step.h): started ahead of its
// launch, in its ranks' cgroup already; a launch that takes it runs its ranks under it, and one
// that is dropped leaves nothing behind. Through the WorkerSupervisor with `step_standby` on, and
// the hand-over's line reader alone. Like the agent, the test blocks SIGCHLD, SIGTERM and SIGINT.
#include "agent/step/step_standby.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "agent/process_spawner.h"
#include "agent/standby_step.h"
#include "agent/step/step_records.h"
#include "agent/worker_supervisor.h"
#include "common/platform/process_cgroup.h"
#include "tests/common/supervisor_fixture.h"

namespace trainlet::agent {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using testing::Alive;

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Where a standby of this host puts itself: "" when it makes no cgroup here (not root, no
// cgroup2), else the directory of its cgroup once it has moved there (waited for: the move takes
// an RCU grace period after the standby started).
std::string CgroupDirOf(pid_t pid) {
  if (geteuid() != 0) return "";
  const auto mounts = platform::ParseCgroupMounts(ReadFile("/proc/self/mountinfo"));
  if (mounts.v2.empty()) return "";
  const std::string name = "/step-" + std::to_string(pid);
  std::optional<std::string> own;
  const auto deadline = Clock::now() + 5s;
  while (Clock::now() < deadline) {
    own = platform::ParseOwnCgroup(ReadFile("/proc/" + std::to_string(pid) + "/cgroup"), "");
    if (own && own->ends_with(name)) break;
    std::this_thread::sleep_for(2ms);
  }
  return own ? mounts.v2 + *own : "";
}

TEST(ReadHandOverTest, OneLineThenNothingMore) {
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  const std::string text = "/state/steps/job-a-1\nleft for later";
  ASSERT_EQ(write(p[1], text.data(), text.size()), static_cast<ssize_t>(text.size()));
  close(p[1]);
  EXPECT_EQ(step::ReadHandOver(p[0]), std::optional<std::string>("/state/steps/job-a-1"));
  char rest[64] = {};
  EXPECT_EQ(read(p[0], rest, sizeof rest), 14);       // nothing past the line was taken
  EXPECT_EQ(step::ReadHandOver(p[0]), std::nullopt);  // EOF
  close(p[0]);
}

TEST(ReadHandOverTest, NoWholeLineIsNothing) {
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  ASSERT_EQ(write(p[1], "/no/newline", 11), 11);
  close(p[1]);
  EXPECT_EQ(step::ReadHandOver(p[0]), std::nullopt);
  close(p[0]);
}

class StandbyStepTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { testing::BlockAgentSignals(); }

  void SetUp() override {
    char tmpl[] = "/tmp/trainlet-standby-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = fs::canonical(tmpl);
    options_ = testing::StepOptionsUnder(dir_);
    options_.step_standby = true;
  }

  void TearDown() override {
    if (sup_) {
      sup_->KillAllAndWait(5s);
      sup_.reset();
    }
    while (waitpid(-1, nullptr, WNOHANG) > 0) {
    }
    fs::remove_all(dir_);
  }

  WorkerLaunch Launch(const std::string& job, uint32_t rank) {
    WorkerLaunch l;
    l.job = job;
    l.attempt = 1;
    l.rank = rank;
    l.local_rank = rank;
    l.argv = {"/bin/true"};
    l.log_path = (dir_ / "logs" / (job + "-" + std::to_string(rank) + ".log")).string();
    return l;
  }

  std::vector<WorkerExit> WaitExits(size_t n) {
    std::vector<WorkerExit> all;
    const auto deadline = Clock::now() + 10s;
    while (all.size() < n && Clock::now() < deadline) {
      for (auto& e : sup_->Reap()) all.push_back(e);
      if (all.size() < n) std::this_thread::sleep_for(2ms);
    }
    return all;
  }

  // The pids of the step processes, from their events files' headers.
  std::set<pid_t> StepPids() const {
    std::set<pid_t> pids;
    for (const auto& e : fs::directory_iterator(options_.steps_dir)) {
      std::vector<step::StepRecord> records;
      (void)step::ParseRecords(ReadFile(e.path() / "events"), 0, &records);
      if (!records.empty()) pids.insert(records[0].pid);
    }
    return pids;
  }

  // Ticks the supervisor as the agent's loop does until its standby runs; its pid, or 0.
  pid_t WaitStandby() {
    const auto deadline = Clock::now() + 5s;
    while (Clock::now() < deadline) {
      sup_->Tick(Clock::now());
      if (sup_->standby_pid() > 0) return sup_->standby_pid();
      std::this_thread::sleep_for(5ms);
    }
    return 0;
  }

  fs::path dir_;
  WorkerSupervisor::Options options_;
  std::unique_ptr<ProcessSpawner> posix_ = MakePosixProcessSpawner();
  std::unique_ptr<WorkerSupervisor> sup_;
};

// The second launch on a node runs under the standby started after the first: the step's pid is
// the standby's, its ranks run and exit as under any step, and a next standby follows.
TEST_F(StandbyStepTest, NextLaunchRunsUnderTheStandby) {
  sup_ = std::make_unique<WorkerSupervisor>(
      posix_.get(), std::vector<std::string>{"PATH=/usr/bin:/bin"}, options_);
  EXPECT_EQ(sup_->standby_pid(), 0) << "none before the first launch";
  auto first = sup_->StartStep({Launch("job-a", 0)}, 1s);
  ASSERT_TRUE(first[0].ok()) << first[0].status().ToString();
  ASSERT_EQ(WaitExits(1).size(), 1u);

  const pid_t standby = WaitStandby();
  ASSERT_GT(standby, 0) << "no standby step after the first launch";
  EXPECT_TRUE(Alive(standby));
  const std::string cgroup = CgroupDirOf(standby);
  if (!cgroup.empty()) {
    EXPECT_EQ(fs::path(cgroup).filename(), "step-" + std::to_string(standby))
        << "a standby waits in its ranks' cgroup already";
  }

  auto second = sup_->StartStep({Launch("job-b", 0), Launch("job-b", 1)}, 1s);
  ASSERT_TRUE(second[0].ok()) << second[0].status().ToString();
  ASSERT_TRUE(second[1].ok()) << second[1].status().ToString();
  EXPECT_TRUE(StepPids().contains(standby)) << "the standby is the step of the launch";
  const auto exits = WaitExits(2);
  ASSERT_EQ(exits.size(), 2u);
  for (const auto& e : exits) {
    EXPECT_EQ(e.job, "job-b");
    EXPECT_EQ(e.exit_code, 0);
  }
  EXPECT_EQ(sup_->standby_pid(), 0) << "taken";
  const pid_t next = WaitStandby();
  EXPECT_GT(next, 0);
  EXPECT_NE(next, standby);
}

// A standby nobody takes ends with its supervisor, and its cgroup goes with it.
TEST_F(StandbyStepTest, DroppedStandbyLeavesNothing) {
  sup_ = std::make_unique<WorkerSupervisor>(
      posix_.get(), std::vector<std::string>{"PATH=/usr/bin:/bin"}, options_);
  auto first = sup_->StartStep({Launch("job-a", 0)}, 1s);
  ASSERT_TRUE(first[0].ok());
  ASSERT_EQ(WaitExits(1).size(), 1u);
  const pid_t standby = WaitStandby();
  ASSERT_GT(standby, 0);
  const std::string cgroup = CgroupDirOf(standby);
  sup_->KillAllAndWait(5s);
  sup_.reset();  // drops it and reaps it
  EXPECT_FALSE(Alive(standby));
  if (!cgroup.empty()) EXPECT_FALSE(fs::exists(cgroup)) << cgroup;
}

// A standby that died before a launch took it: the launch spawns its step as before.
TEST_F(StandbyStepTest, DeadStandbyIsSteppedAround) {
  sup_ = std::make_unique<WorkerSupervisor>(
      posix_.get(), std::vector<std::string>{"PATH=/usr/bin:/bin"}, options_);
  ASSERT_TRUE(sup_->StartStep({Launch("job-a", 0)}, 1s)[0].ok());
  ASSERT_EQ(WaitExits(1).size(), 1u);
  const pid_t standby = WaitStandby();
  ASSERT_GT(standby, 0);
  ASSERT_EQ(kill(standby, SIGKILL), 0);
  const auto deadline = Clock::now() + 5s;
  while (sup_->standby_pid() != 0 && Clock::now() < deadline) {
    sup_->Reap();
    std::this_thread::sleep_for(2ms);
  }
  EXPECT_EQ(sup_->standby_pid(), 0) << "reaped and forgotten";
  auto next = sup_->StartStep({Launch("job-c", 0)}, 1s);
  ASSERT_TRUE(next[0].ok()) << next[0].status().ToString();
  EXPECT_FALSE(StepPids().contains(standby));
  EXPECT_EQ(StepPids().size(), 2u) << "job-a's step and job-c's, spawned";
  EXPECT_EQ(WaitExits(1).size(), 1u);
}

}  // namespace
}  // namespace trainlet::agent
