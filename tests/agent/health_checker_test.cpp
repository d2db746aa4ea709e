// The agent's health checks: the program (pass, fail with output, timeout, missing), the built-in
// disk and GPU-count checks, and node taints as the agent parses them.
#include "agent/health_checker.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "agent/node_taints.h"

namespace trainlet::agent {
namespace {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

class HealthCheckerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("trainlet-health-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
    spawner_ = MakePosixProcessSpawner();
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string Script(const std::string& body) {
    const std::string path = (dir_ / "check.sh").string();
    std::ofstream(path) << "#!/bin/sh\n" << body << "\n";
    fs::permissions(path, fs::perms::owner_all);
    return path;
  }

  // Drives the checker like the agent's loop until no program runs (or `limit` passes).
  void RunOnce(HealthChecker& h, milliseconds limit = milliseconds(5000)) {
    const auto end = Clock::now() + limit;
    h.Tick(Clock::now());
    while (h.running() && Clock::now() < end) {
      std::vector<zmq_pollitem_t> items;
      h.AddPollItems(items);
      const auto wait = h.Tick(Clock::now());
      if (!items.empty()) {
        zmq_poll(items.data(), static_cast<int>(items.size()),
                 static_cast<long>(std::min<int64_t>(wait.count(), 50)));
      }
      h.OnPolled(items, Clock::now());
      h.Reap();
    }
  }

  HealthCheckConfig Config(const std::string& program) {
    HealthCheckConfig c;
    c.program = program;
    c.interval = milliseconds(100000);
    c.timeout = milliseconds(3000);
    c.state_dir = dir_.string();
    c.check_gpu_count = false;
    return c;
  }

  std::vector<std::string> Env() { return {"PATH=/usr/bin:/bin"}; }

  fs::path dir_;
  std::unique_ptr<ProcessSpawner> spawner_;
};

TEST_F(HealthCheckerTest, PassingProgramKeepsTheNodeHealthy) {
  HealthChecker h(Config(Script("echo all good; exit 0")), spawner_.get(), Env());
  RunOnce(h);
  EXPECT_FALSE(h.running());
  EXPECT_TRUE(h.healthy()) << h.reason();
  EXPECT_EQ(h.reason(), "");
}

TEST_F(HealthCheckerTest, FailingProgramGivesItsOutputAsTheReason) {
  const std::string prog = Script("echo 'GPU 3: XID 79' >&2; echo fallen off; exit 3");
  HealthChecker h(Config(prog), spawner_.get(), Env());
  RunOnce(h);
  EXPECT_FALSE(h.healthy());
  EXPECT_EQ(h.reason(), "health check program " + prog + " exited 3: GPU 3: XID 79 fallen off");
}

TEST_F(HealthCheckerTest, LongOutputIsTruncated) {
  HealthChecker h(Config(Script("i=0; while [ $i -lt 500 ]; do echo line-$i-xxxxxxxxxxxxxxxx; "
                                "i=$((i+1)); done; exit 1")),
                  spawner_.get(), Env());
  RunOnce(h);
  EXPECT_FALSE(h.healthy());
  EXPECT_LT(h.reason().size(), HealthChecker::kMaxOutput + 200);
  EXPECT_NE(h.reason().find("line-0-"), std::string::npos);
  EXPECT_EQ(h.reason().substr(h.reason().size() - 4), " ...");
}

TEST_F(HealthCheckerTest, ProgramPastItsTimeoutIsKilled) {
  auto c = Config(Script("echo started; sleep 30"));
  c.timeout = milliseconds(200);
  HealthChecker h(c, spawner_.get(), Env());
  const auto start = Clock::now();
  RunOnce(h);
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(5));
  EXPECT_FALSE(h.running());
  EXPECT_FALSE(h.healthy());
  EXPECT_NE(h.reason().find("timed out after 200 ms"), std::string::npos) << h.reason();
}

TEST_F(HealthCheckerTest, AHealthyRunAfterAFailureClearsTheReason) {
  const std::string flag = (dir_ / "broken").string();
  std::ofstream(flag) << "x";
  auto c = Config(Script("if [ -e " + flag + " ]; then echo broken; exit 1; fi; exit 0"));
  c.interval = milliseconds(1);
  HealthChecker h(c, spawner_.get(), Env());
  RunOnce(h);
  EXPECT_FALSE(h.healthy());
  fs::remove(flag);
  std::this_thread::sleep_for(milliseconds(5));
  RunOnce(h);
  EXPECT_TRUE(h.healthy()) << h.reason();
}

TEST_F(HealthCheckerTest, MissingProgramIsUnhealthy) {
  HealthChecker h(Config((dir_ / "absent").string()), spawner_.get(), Env());
  RunOnce(h);
  EXPECT_FALSE(h.healthy());
  EXPECT_NE(h.reason().find("exited 127"), std::string::npos) << h.reason();
}

TEST_F(HealthCheckerTest, LowDiskSpaceIsUnhealthy) {
  auto c = Config("");
  c.min_free_disk_bytes = uint64_t{10} << 30;
  int64_t free = int64_t{20} << 30;
  HealthChecker h(c, spawner_.get(), Env(), {}, [&free](const std::string&) { return free; });
  h.Tick(Clock::now());
  EXPECT_TRUE(h.healthy());
  free = int64_t{512} << 20;
  h.Tick(Clock::now() + milliseconds(200000));
  EXPECT_FALSE(h.healthy());
  EXPECT_EQ(h.reason(),
            "state dir " + dir_.string() + " has 512 MiB free, under the 10 GiB minimum");
}

TEST_F(HealthCheckerTest, GpuCountChangeIsUnhealthy) {
  auto c = Config("");
  c.check_gpu_count = true;
  int gpus = 8;
  HealthChecker h(c, spawner_.get(), Env(), [&gpus] { return gpus; });
  h.Tick(Clock::now());
  EXPECT_TRUE(h.healthy());
  gpus = 7;
  h.Tick(Clock::now() + milliseconds(200000));
  EXPECT_FALSE(h.healthy());
  EXPECT_EQ(h.reason(), "GPU count changed: 7 now, 8 when the agent started");
  gpus = 8;
  h.Tick(Clock::now() + milliseconds(400000));
  EXPECT_TRUE(h.healthy());
}

TEST_F(HealthCheckerTest, AcceleratorTurningUnhealthyIsUnhealthy) {
  auto c = Config("");
  std::string verdict;
  HealthChecker h(
      c, spawner_.get(), Env(), [] { return 8; }, {}, [&verdict] { return verdict; });
  h.Tick(Clock::now());
  EXPECT_TRUE(h.healthy());
  verdict = "nvidia GPU 0000:17:00.0: unhealthy: XID 79";
  h.Tick(Clock::now() + milliseconds(200000));
  EXPECT_FALSE(h.healthy());
  EXPECT_EQ(h.reason(), "nvidia GPU 0000:17:00.0: unhealthy: XID 79");
}

TEST(NodeTaints, Parses) {
  auto t = ParseTaint("gpu=true:NoSchedule");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->key(), "gpu");
  EXPECT_EQ(t->value(), "true");
  EXPECT_EQ(t->effect(), "NoSchedule");
  t = ParseTaint("maintenance:NoExecute");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->key(), "maintenance");
  EXPECT_EQ(t->value(), "");
  auto list = ParseTaintList(" gpu=true:NoSchedule, spot:PreferNoSchedule ");
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->size(), 2u);
  EXPECT_TRUE(ParseTaintList("")->empty());
}

TEST(NodeTaints, RefusesBadOnes) {
  for (const char* bad : {"gpu", "gpu=true", "gpu=true:Never", ":NoSchedule", "=x:NoSchedule",
                          "a b:NoSchedule", "gpu=:NoSchedule"}) {
    auto t = ParseTaint(bad);
    EXPECT_FALSE(t.ok()) << bad;
    if (!t.ok()) {
      EXPECT_EQ(t.status().code(), ErrorCode::kInvalid);
      EXPECT_NE(t.status().message().find(std::string("\"") + bad + "\""), std::string::npos);
    }
  }
  auto list = ParseTaintList("a:NoSchedule,b:Sometimes");
  ASSERT_FALSE(list.ok());
  EXPECT_NE(list.status().message().find("b:Sometimes"), std::string::npos);
}

}  // namespace
}  // namespace trainlet::agent
