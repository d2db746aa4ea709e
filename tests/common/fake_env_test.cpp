// The test Env (tests/common/fake_env.h) does what the tests that use it rely on.
#include "tests/common/fake_env.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>

#include "tests/common/test_dir.h"

namespace trainlet::testing {
namespace {

using namespace std::chrono_literals;

TEST(FakeEnvTest, ClocksMoveOnlyWhenTold) {
  FakeEnv env;
  const auto steady = env.MonotonicNow();
  const int64_t wall = env.WallUnixMs();
  EXPECT_EQ(env.MonotonicNow(), steady);
  env.Advance(1500ms);
  EXPECT_EQ(env.MonotonicNow() - steady, 1500ms);
  EXPECT_EQ(env.WallUnixMs() - wall, 1500);

  env.Jump(-std::chrono::hours(1));  // the wall clock alone steps back
  EXPECT_EQ(env.MonotonicNow() - steady, 1500ms);
  EXPECT_EQ(env.WallUnixMs() - wall, 1500 - 3'600'000);

  env.SleepFor(20ms);  // returns at once, the clocks moved
  EXPECT_EQ(env.MonotonicNow() - steady, 1520ms);
  EXPECT_EQ(env.slept(), 20ms);
}

TEST(FakeEnvTest, FixedHostAndProcess) {
  FakeEnv env;
  env.set_hostname("node-7");
  env.set_environment({"A=1"});
  ASSERT_TRUE(env.Hostname().ok());
  EXPECT_EQ(*env.Hostname(), "node-7");
  EXPECT_EQ(env.Environment(), std::vector<std::string>{"A=1"});
  EXPECT_NE(env.ProcessId(), getpid());
}

TEST(FakeEnvTest, InjectedFailuresHitTheNextCallOnly) {
  TempDir dir;
  FakeEnv env;
  const std::string path = dir.File("f");
  env.FailNextWrite(FakeEnv::DiskFull(path));
  Status full = env.WriteFileAtomically(path, "x", 0644);
  ASSERT_FALSE(full.ok());
  EXPECT_EQ(full.code(), ErrorCode::kIo);
  EXPECT_NE(full.message().find("No space left"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(path));

  ASSERT_TRUE(env.WriteFileAtomically(path, "x", 0644).ok());  // the disk has room again
  Result<std::string> read = env.ReadFile(path, 10);
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(*read, "x");

  env.FailNextCreateDirectories(IoError("mkdir: injected"));
  EXPECT_FALSE(env.CreateDirectories(dir.File("d")).ok());
  EXPECT_TRUE(env.CreateDirectories(dir.File("d")).ok());

  env.FailNextLock(Status(ErrorCode::kExists, "held"));
  EXPECT_FALSE(env.LockFile(dir.File("lock")).ok());
  EXPECT_TRUE(env.LockFile(dir.File("lock")).ok());

  env.FailNextRead(PermissionError(path + ": Permission denied"));
  EXPECT_EQ(env.ReadFile(path, 10).status().code(), ErrorCode::kPermission);
  EXPECT_TRUE(env.ReadFile(path, 10).ok());
}

TEST(FakeEnvTest, BecomingASubreaperIsRecordedNotDone) {
  FakeEnv env;
  EXPECT_TRUE(env.BecomeChildSubreaper().ok());
  env.set_subreaper_status(UnavailableError("no subreaper here"));
  EXPECT_EQ(env.BecomeChildSubreaper().code(), ErrorCode::kUnavailable);
  EXPECT_EQ(env.subreaper_calls(), 2);
}

TEST(FakeEnvTest, LockRetriesSleepOnTheFakeClock) {
  TempDir dir;
  FakeEnv env;
  auto held = env.LockFile(dir.File("lock"));
  ASSERT_TRUE(held.ok());
  const auto before = std::chrono::steady_clock::now();
  auto second = env.LockFile(dir.File("lock"));
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), ErrorCode::kExists);
  EXPECT_EQ(env.slept(), (platform::Env::kLockAttempts - 1) * platform::Env::kLockRetryInterval);
  EXPECT_LT(std::chrono::steady_clock::now() - before, 500ms) << "no real sleeping";
}

TEST(FakeEnvTest, SpawnerRecordsAndFailsOnRequest) {
  FakeEnv env;
  platform::ProcessSpawner& processes = env.processes();
  platform::ProcessSpawner::Request request;
  request.argv = {"/bin/true"};
  Result<pid_t> first = processes.Spawn(request);
  ASSERT_TRUE(first.ok());
  EXPECT_GE(*first, FakeSpawner::kFirstPid);

  env.spawner().FailNextSpawn(NotFoundError("spawn /bin/true: injected"));
  Result<pid_t> failed = processes.Spawn(request);
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), ErrorCode::kNotFound);
  Result<pid_t> third = processes.Spawn(request);
  ASSERT_TRUE(third.ok());
  EXPECT_NE(*third, *first);
  EXPECT_EQ(env.spawner().requests().size(), 3u);

  EXPECT_EQ(processes.Kill(-*first, SIGTERM), 0);
  env.spawner().SetKillResult(ESRCH);
  EXPECT_EQ(processes.Kill(*third, SIGKILL), ESRCH);
  ASSERT_EQ(env.spawner().signals().size(), 2u);
  EXPECT_EQ(env.spawner().signals()[0].target, -*first);
  EXPECT_EQ(env.spawner().signals()[0].sig, SIGTERM);
}

}  // namespace
}  // namespace trainlet::testing
