// no_new_privs for the ranks of a real trainlet-step (agent/step/rank_identity.h, issue 19): every
// rank runs with it by default, root ranks included, so a setuid binary changes nothing of who it
// is; a rank whose container sets securityContext.allowPrivilegeEscalation: true runs without it.
// As the agent does, the test blocks SIGCHLD, SIGTERM and SIGINT.
#include <gtest/gtest.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "agent/process_spawner.h"
#include "agent/worker_supervisor.h"
#include "tests/common/supervisor_fixture.h"

namespace trainlet::agent {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class StepNoNewPrivsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { testing::BlockAgentSignals(); }

  void SetUp() override {
    char tmpl[] = "/tmp/trainlet-nnp-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = fs::canonical(tmpl);
    sup_ = std::make_unique<WorkerSupervisor>(
        posix_.get(), std::vector<std::string>{"PATH=/usr/bin:/bin", "LANG=C"},
        testing::StepOptionsUnder(dir_));
  }
  void TearDown() override {
    sup_->KillAllAndWait(5s);
    sup_.reset();
    while (waitpid(-1, nullptr, WNOHANG) > 0) {
    }
    fs::remove_all(dir_);
  }

  // Runs `script` as rank 0 of its own job under a step and returns its log once it exited 0.
  std::string Run(const std::string& job, const std::string& script,
                  std::optional<bool> allow_privilege_escalation) {
    WorkerLaunch l;
    l.job = job;
    l.attempt = 1;
    l.argv = {"/bin/sh", "-c", script};
    l.log_path = (dir_ / "logs" / (job + ".log")).string();
    l.run_as.allow_privilege_escalation = allow_privilege_escalation;
    auto started = sup_->StartStep({l}, 1s);
    EXPECT_EQ(started.size(), 1u);
    if (started.empty() || !started[0].ok()) return "not started";
    std::vector<WorkerExit> exits;
    for (auto deadline = Clock::now() + 10s; exits.empty() && Clock::now() < deadline;) {
      exits = sup_->Reap();
      if (exits.empty()) std::this_thread::sleep_for(2ms);
    }
    EXPECT_EQ(exits.size(), 1u);
    if (!exits.empty()) EXPECT_EQ(exits[0].exit_code, 0) << ReadFile(l.log_path);
    return ReadFile(l.log_path);
  }

  fs::path dir_;
  std::unique_ptr<ProcessSpawner> posix_ = MakePosixProcessSpawner();
  std::unique_ptr<WorkerSupervisor> sup_;
};

const char* kNoNewPrivs = "grep NoNewPrivs /proc/self/status | tr -d '\\t '";

TEST_F(StepNoNewPrivsTest, EveryRankGetsItUnlessItsContainerAllowsEscalation) {
  if (ReadFile("/proc/self/status").find("NoNewPrivs:\t1") != std::string::npos)
    GTEST_SKIP() << "the test itself runs with no_new_privs: no rank could run without it";
  EXPECT_EQ(Run("unset", kNoNewPrivs, std::nullopt), "NoNewPrivs:1\n");
  EXPECT_EQ(Run("false", kNoNewPrivs, false), "NoNewPrivs:1\n");
  EXPECT_EQ(Run("true", kNoNewPrivs, true), "NoNewPrivs:0\n");
}

// The setuid test of rank_identity_test, for a rank that stays root: a copy of `id` that is
// setuid to nobody makes root nobody by exec, unless no_new_privs is set.
TEST_F(StepNoNewPrivsTest, ASetuidBinaryDoesNotChangeARootRank) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to make a setuid binary of another user";
  if (ReadFile("/proc/self/status").find("NoNewPrivs:\t1") != std::string::npos)
    GTEST_SKIP() << "the test itself runs with no_new_privs";
  struct statvfs fs_info {};
  ASSERT_EQ(statvfs(dir_.c_str(), &fs_info), 0);
  if ((fs_info.f_flag & ST_NOSUID) != 0) GTEST_SKIP() << dir_ << " is mounted nosuid";
  const std::string suid_id = (dir_ / "id").string();
  fs::copy_file("/usr/bin/id", suid_id);
  ASSERT_EQ(chown(suid_id.c_str(), 65534, 65534), 0);
  ASSERT_EQ(chmod(suid_id.c_str(), 04755), 0);
  EXPECT_EQ(Run("default", suid_id + " -u", std::nullopt), "0\n")
      << "a setuid binary changed who a root rank is";
  // The opt-out is real: the same binary does change it then (so the check above can fail).
  EXPECT_EQ(Run("allowed", suid_id + " -u", true), "65534\n");
}

}  // namespace
}  // namespace trainlet::agent
