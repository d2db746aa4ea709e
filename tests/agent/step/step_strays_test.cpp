// Nothing a rank starts outlives its step: processes that leave the rank's process group and
// session (setsid), lose their parent (a double fork) or clear their environment (env -i) are
// killed when the ranks end or are stopped, under each way the step has of finding them: a v2
// cgroup, a v1 freezer cgroup, and, with no cgroup, the orphans that came to the step as a
// subreaper. Run under real trainlet-step processes, as the agent runs them.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "agent/process_spawner.h"
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

// Whether this host and user can give a step a cgroup of `mode`, and why not.
std::string CgroupUnavailable(const std::string& mode) {
  if (mode == "none") return "";
  if (geteuid() != 0) return "cgroups need root here";
  const auto mounts = platform::ParseCgroupMounts(ReadFile("/proc/self/mountinfo"));
  if (mode == "v2" && mounts.v2.empty()) return "no cgroup2 hierarchy on this host";
  if (mode == "v1" && mounts.v1_freezer.empty()) return "no v1 freezer on this host";
  return "";
}

class StepStraysTest : public ::testing::TestWithParam<std::string> {
 protected:
  static void SetUpTestSuite() { testing::BlockAgentSignals(); }

  void SetUp() override {
    if (const std::string why = CgroupUnavailable(GetParam()); !why.empty()) GTEST_SKIP() << why;
    char tmpl[] = "/tmp/trainlet-strays-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = fs::canonical(tmpl);
    auto options = testing::StepOptionsUnder(dir_);
    options.step_cgroup = GetParam();
    sup_ = std::make_unique<WorkerSupervisor>(
        posix_.get(), std::vector<std::string>{"PATH=/usr/bin:/bin", "LANG=C"}, options);
  }

  void TearDown() override {
    // Whatever the test left: the strays by pid (they are this test's), then the step.
    for (const pid_t pid : strays_) {
      if (pid > 0) kill(pid, SIGKILL);
    }
    if (sup_) {
      sup_->KillAllAndWait(5s);
      sup_.reset();
    }
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  // A rank that starts two strays, one in a session of its own and one double-forked with an
  // empty environment, writes their pids, and waits for `go` before it exits (or, with
  // `until_stopped`, runs until stopped).
  WorkerLaunch StrayMaker(bool until_stopped) {
    const std::string d = dir_.string();
    WorkerLaunch l;
    l.job = "job-s";
    l.attempt = 1;
    l.argv = {"/bin/sh", "-c",
              "setsid /bin/sh -c 'echo $$ > " + d + "/a.tmp; mv " + d + "/a.tmp " + d +
                  "/a.pid; exec sleep 300' </dev/null >/dev/null 2>&1 &\n"
                  "( env -i /usr/bin/setsid /bin/sh -c 'echo $$ > " +
                  d + "/b.tmp; mv " + d + "/b.tmp " + d +
                  "/b.pid; exec /bin/sleep 300' </dev/null >/dev/null 2>&1 & )\n" +
                  (until_stopped ? "exec sleep 300\n"
                                 : "while [ ! -e " + d + "/go ]; do sleep 0.01; done\n")};
    l.log_path = d + "/logs/rank-0.log";
    return l;
  }

  // The strays' pids, once both have written them.
  void WaitForStrays() {
    const auto deadline = Clock::now() + 10s;
    while (Clock::now() < deadline &&
           (!fs::exists(dir_ / "a.pid") || !fs::exists(dir_ / "b.pid"))) {
      std::this_thread::sleep_for(5ms);
    }
    strays_ = {std::atoi(ReadFile(dir_ / "a.pid").c_str()),
               std::atoi(ReadFile(dir_ / "b.pid").c_str())};
    ASSERT_GT(strays_[0], 0);
    ASSERT_GT(strays_[1], 0);
    for (const pid_t pid : strays_) {
      ASSERT_TRUE(Alive(pid)) << pid;
      // Escaped: neither is in the rank's process group any more.
      EXPECT_NE(getpgid(pid), rank_pid_) << pid;
      if (GetParam() != "none") {
        const std::string cgroups = ReadFile("/proc/" + std::to_string(pid) + "/cgroup");
        EXPECT_NE(cgroups.find("/trainlet/step-"), std::string::npos)
            << "pid " << pid << " is not in the step's cgroup:\n"
            << cgroups;
      }
    }
  }

  void ExpectStraysGone() {
    const auto deadline = Clock::now() + 10s;
    while (Clock::now() < deadline && (Alive(strays_[0]) || Alive(strays_[1]))) {
      std::this_thread::sleep_for(5ms);
    }
    EXPECT_FALSE(Alive(strays_[0])) << "the setsid stray outlived its step";
    EXPECT_FALSE(Alive(strays_[1])) << "the double-forked env -i stray outlived its step";
  }

  // No cgroup of a step that ended is left behind.
  void ExpectNoStepCgroups() {
    if (GetParam() == "none") return;
    const auto mounts = platform::ParseCgroupMounts(ReadFile("/proc/self/mountinfo"));
    const std::string mount = GetParam() == "v1" ? mounts.v1_freezer : mounts.v2;
    const std::string own =
        platform::ParseOwnCgroup(ReadFile("/proc/self/cgroup"), GetParam() == "v1" ? "freezer" : "")
            .value_or("/");
    const fs::path parent = fs::path(mount + (own == "/" ? "" : own)) / "trainlet";
    const auto deadline = Clock::now() + 5s;
    auto leftover = [&] {
      std::error_code ec;
      for (const auto& e : fs::directory_iterator(parent, ec)) {
        if (e.path().filename() == "step-" + std::to_string(step_pid_)) return true;
      }
      return false;
    };
    while (leftover() && Clock::now() < deadline) std::this_thread::sleep_for(5ms);
    EXPECT_FALSE(leftover()) << parent;
  }

  pid_t StartStep(bool until_stopped) {
    auto started = sup_->StartStep({StrayMaker(until_stopped)}, 1s);
    EXPECT_EQ(started.size(), 1u);
    if (started.empty() || !started[0].ok()) return -1;
    rank_pid_ = *started[0];
    for (const auto& e : fs::directory_iterator(dir_ / "steps")) {
      std::vector<step::StepRecord> records;
      (void)step::ParseRecords(ReadFile(e.path() / "events"), 0, &records);
      if (!records.empty()) step_pid_ = records[0].pid;
    }
    EXPECT_GT(step_pid_, 0);
    return rank_pid_;
  }

  std::vector<WorkerExit> WaitExits(size_t n) {
    std::vector<WorkerExit> all;
    const auto deadline = Clock::now() + 10s;
    while (all.size() < n && Clock::now() < deadline) {
      for (auto& e : sup_->Reap()) all.push_back(e);
      std::this_thread::sleep_for(2ms);
    }
    return all;
  }

  // What the supervisor says of the attempt's leftovers once its step has ended them.
  WorkerSupervisor::Leftovers LeftoversOnceDone() {
    const auto deadline = Clock::now() + 10s;
    auto left = sup_->LeftoversOf("job-s", 1);
    while ((left.winding || left.running) && Clock::now() < deadline) {
      (void)sup_->Reap();
      std::this_thread::sleep_for(5ms);
      left = sup_->LeftoversOf("job-s", 1);
    }
    EXPECT_FALSE(left.winding || left.running) << "the step is not done";
    return left;
  }
  // With a cgroup, the step says nothing is left (the agent skips its env sweep); without one,
  // the agent must sweep.
  bool ExpectedUncontained() const { return GetParam() == "none"; }

  fs::path dir_;
  std::unique_ptr<ProcessSpawner> posix_ = MakePosixProcessSpawner();
  std::unique_ptr<WorkerSupervisor> sup_;
  pid_t rank_pid_ = -1;
  pid_t step_pid_ = -1;
  std::vector<pid_t> strays_;
};

TEST_P(StepStraysTest, RankExitsAndWhatItDetachedDies) {
  ASSERT_GT(StartStep(/*until_stopped=*/false), 0);
  ASSERT_NO_FATAL_FAILURE(WaitForStrays());
  std::ofstream(dir_ / "go").put('\n');
  const auto exits = WaitExits(1);
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_EQ(exits[0].exit_code, 0);
  ExpectStraysGone();
  ExpectNoStepCgroups();
  EXPECT_EQ(LeftoversOnceDone().uncontained, ExpectedUncontained());
  EXPECT_TRUE(sup_->LeftoversOf("job-s", 2).uncontained) << "not known here";
}

// What `trainletctl delete` does on a node: the agent stops the step.
TEST_P(StepStraysTest, StoppedStepLeavesNothingRunning) {
  ASSERT_GT(StartStep(/*until_stopped=*/true), 0);
  ASSERT_NO_FATAL_FAILURE(WaitForStrays());
  const auto t0 = Clock::now();
  sup_->Stop("job-s", 1, 200ms, t0);
  const auto exits = WaitExits(1);
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_EQ(exits[0].signal, SIGTERM);
  ExpectStraysGone();
  ExpectNoStepCgroups();
}

// The step stays in its ranks' cgroup while they run (a move between cgroups waits for an RCU
// grace period; leaving after the spawns delayed every launch by one), and leaves it before it
// kills it: a stop past its grace (SIGKILL to the cgroup) kills the ranks and their strays, and
// the step lives on to record how they ended.
TEST_P(StepStraysTest, StepStaysInTheCgroupUntilItKillsIt) {
  if (GetParam() == "none") GTEST_SKIP() << "no cgroup to be in";
  ASSERT_GT(StartStep(/*until_stopped=*/true), 0);
  ASSERT_NO_FATAL_FAILURE(WaitForStrays());
  const std::string cgroups = ReadFile("/proc/" + std::to_string(step_pid_) + "/cgroup");
  EXPECT_NE(cgroups.find("/trainlet/step-" + std::to_string(step_pid_)), std::string::npos)
      << cgroups;
  sup_->Stop("job-s", 1, 0ms, Clock::now());  // SIGKILL at once
  const auto exits = WaitExits(1);
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_EQ(exits[0].signal, SIGKILL);
  EXPECT_EQ(exits[0].message, "") << "the step died with its cgroup";
  ExpectStraysGone();
  ExpectNoStepCgroups();
  EXPECT_FALSE(LeftoversOnceDone().uncontained);
}

// A step killed outright (the OOM killer, kill -9) cannot end its ranks' cgroup itself: the agent
// does, so what a rank detached dies with the step's ranks, and the cgroup goes.
TEST_P(StepStraysTest, AStepKilledOutrightTakesItsStraysWithIt) {
  if (GetParam() == "none") GTEST_SKIP() << "no cgroup: detached strays are out of reach";
  ASSERT_GT(StartStep(/*until_stopped=*/true), 0);
  ASSERT_NO_FATAL_FAILURE(WaitForStrays());
  ASSERT_EQ(kill(step_pid_, SIGKILL), 0);
  const auto exits = WaitExits(1);
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_NE(exits[0].message.find("step process died"), std::string::npos) << exits[0].message;
  ExpectStraysGone();
  for (int i = 0; i < 100; ++i) {  // the cgroup is removed at a later Reap, once it is empty
    (void)sup_->Reap();
    std::this_thread::sleep_for(10ms);
  }
  ExpectNoStepCgroups();
  // It wrote no D: the agent's env sweep still runs for its attempt.
  EXPECT_TRUE(sup_->LeftoversOf("job-s", 1).uncontained);
}

INSTANTIATE_TEST_SUITE_P(Modes, StepStraysTest, ::testing::Values("v2", "v1", "none"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace trainlet::agent
