// trainlet-step with MPI ranks started directly: ranks whose env names a PMIx job map get the
// node's PMIx server (trainlet-pmix, beside trainlet-step) first and its env on top of theirs; a
// server that cannot start fails every rank with its reason; the server does not outlive the
// ranks and leaves no files. Real processes (a one-node job needs no rendezvous: libpmix completes
// its fences locally).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "agent/process_spawner.h"
#include "agent/worker_supervisor.h"
#include "common/pmix/pmix_job_map.h"
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

// Live trainlet-pmix processes whose env holds `marker` (this test's directory).
std::vector<pid_t> ServerPids(const std::string& marker) {
  std::vector<pid_t> pids;
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string comm = ReadFile(e.path() / "comm");
    if (comm != "trainlet-pmix\n") continue;
    if (ReadFile(e.path() / "environ").find(marker) == std::string::npos) continue;
    if (ReadFile(e.path() / "stat").find(") Z ") != std::string::npos) continue;  // a zombie
    pids.push_back(static_cast<pid_t>(std::stol(e.path().filename().string())));
  }
  return pids;
}
int ServersWith(const std::string& marker) { return static_cast<int>(ServerPids(marker).size()); }

class StepPmixTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { testing::BlockAgentSignals(); }

  void SetUp() override {
    char tmpl[] = "/tmp/trainlet-step-pmix-XXXXXX";
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

  WorkerLaunch Launch(uint32_t rank, const std::string& job_map, std::vector<std::string> argv) {
    WorkerLaunch l;
    l.job = "job-p";
    l.attempt = 1;
    l.rank = rank;
    l.local_rank = rank;
    l.argv = std::move(argv);
    l.log_path = (dir_ / "logs" / ("rank-" + std::to_string(rank) + ".log")).string();
    l.env = {{pmix::kJobMapEnv, job_map},
             {"TRAINLET_JOB", "job-p"},
             {"TRAINLET_ATTEMPT", "1"},
             {"TRAINLET_NODE_RANK", "0"},
             {"TRAINLET_WORK_DIR", dir_.string()},
             {"TRAINLET_RENDEZVOUS_ENDPOINT", "ipc://" + (dir_ / "none.sock").string()},
             {"TRAINLET_RENDEZVOUS_TOKEN", "t"}};
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

  fs::path dir_;
  std::unique_ptr<ProcessSpawner> posix_ = MakePosixProcessSpawner();
  std::unique_ptr<WorkerSupervisor> sup_;
};

TEST_F(StepPmixTest, EveryRankGetsItsPmixEnvAndTheServerGoesWithTheRanks) {
  if (!fs::exists(std::string(TRAINLET_BINARY_DIR) + "/bin/trainlet-pmix"))
    GTEST_SKIP() << "trainlet-pmix not built (no libpmix-dev)";
  pmix::PmixJobMap map;
  map.nspace = "trainlet.job-p.1";
  map.nodes = {{"host1", {0, 1}}};
  const fs::path map_file = dir_ / "pmix-job-map";
  std::ofstream(map_file) << pmix::EncodeJobMap(map);
  const std::vector<std::string> argv = {
      "/bin/sh", "-c", "echo rank=$PMIX_RANK ns=$PMIX_NAMESPACE uri=${PMIX_SERVER_URI41:+set}"};
  auto started =
      sup_->StartStep({Launch(0, map_file.string(), argv), Launch(1, map_file.string(), argv)}, 1s);
  ASSERT_EQ(started.size(), 2u);
  for (const auto& s : started) ASSERT_TRUE(s.ok()) << s.status().message();
  ASSERT_EQ(WaitExits(2).size(), 2u);
  EXPECT_NE(ReadFile(dir_ / "logs" / "rank-0.log").find("rank=0 ns=trainlet.job-p.1 uri=set"),
            std::string::npos)
      << ReadFile(dir_ / "logs" / "rank-0.log");
  EXPECT_NE(ReadFile(dir_ / "logs" / "rank-1.log").find("rank=1 ns=trainlet.job-p.1 uri=set"),
            std::string::npos)
      << ReadFile(dir_ / "logs" / "rank-1.log");
  const auto deadline = Clock::now() + 5s;
  while (ServersWith(dir_.string()) != 0 && Clock::now() < deadline)
    std::this_thread::sleep_for(10ms);
  EXPECT_EQ(ServersWith(dir_.string()), 0) << "trainlet-pmix outlived its ranks";
  // Ended with SIGTERM, it finalized libpmix and removed its files from the work dir.
  EXPECT_FALSE(fs::exists(dir_ / ".pmix" / "attempt-1-node-0"));
}

// A server that dies under running ranks would leave their PMIx calls waiting forever: the step
// stops them at once.
TEST_F(StepPmixTest, RanksStopWhenTheirServerDies) {
  if (!fs::exists(std::string(TRAINLET_BINARY_DIR) + "/bin/trainlet-pmix"))
    GTEST_SKIP() << "trainlet-pmix not built (no libpmix-dev)";
  pmix::PmixJobMap map;
  map.nspace = "trainlet.job-p.1";
  map.nodes = {{"host1", {0, 1}}};
  const fs::path map_file = dir_ / "pmix-job-map";
  std::ofstream(map_file) << pmix::EncodeJobMap(map);
  auto started = sup_->StartStep({Launch(0, map_file.string(), {"/bin/sleep", "30"}),
                                  Launch(1, map_file.string(), {"/bin/sleep", "30"})},
                                 1s);
  for (const auto& s : started) ASSERT_TRUE(s.ok()) << s.status().message();
  const std::vector<pid_t> servers = ServerPids(dir_.string());
  ASSERT_EQ(servers.size(), 1u);
  const auto t0 = Clock::now();
  ASSERT_EQ(kill(servers[0], SIGKILL), 0);
  auto exits = WaitExits(2);
  ASSERT_EQ(exits.size(), 2u);
  EXPECT_LT(Clock::now() - t0, 3s);
  for (const auto& e : exits) EXPECT_EQ(e.signal, SIGKILL) << "rank " << e.rank;
}

TEST_F(StepPmixTest, AServerThatCannotStartFailsEveryRankWithItsReason) {
  if (!fs::exists(std::string(TRAINLET_BINARY_DIR) + "/bin/trainlet-pmix"))
    GTEST_SKIP() << "trainlet-pmix not built (no libpmix-dev)";
  const std::string missing = (dir_ / "no-such-job-map").string();
  auto started =
      sup_->StartStep({Launch(0, missing, {"/bin/true"}), Launch(1, missing, {"/bin/true"})}, 1s);
  ASSERT_EQ(started.size(), 2u);
  for (const auto& s : started) {
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.status().message().find("PMIx server did not start"), std::string::npos)
        << s.status().message();
    EXPECT_NE(s.status().message().find("no-such-job-map' cannot be read"), std::string::npos)
        << s.status().message();
  }
  EXPECT_EQ(sup_->running(), 0u);
}

}  // namespace
}  // namespace trainlet::agent
