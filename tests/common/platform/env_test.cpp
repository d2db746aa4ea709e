// platform::Env over the real OS (RealEnv): what the daemons rely on from each call, in temp dirs.
#include "common/platform/env.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#if defined(__linux__)
#include <sys/prctl.h>
#endif

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "tests/common/test_dir.h"

namespace trainlet::platform {
namespace {

using namespace std::chrono_literals;
using testing::TempDir;

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(RealEnvTest, ClocksMoveAndSleepWaits) {
  Env& env = RealEnv();
  const auto start = env.MonotonicNow();
  const int64_t wall = env.WallUnixMs();
  env.SleepFor(20ms);
  EXPECT_GE(env.MonotonicNow() - start, 20ms);
  EXPECT_GT(wall, 1'600'000'000'000);  // after September 2020: milliseconds, not seconds
  EXPECT_GE(env.WallUnixMs(), wall);
}

TEST(RealEnvTest, HostAndProcess) {
  Env& env = RealEnv();
  Result<std::string> host = env.Hostname();
  ASSERT_TRUE(host.ok()) << host.status().message();
  EXPECT_FALSE(host->empty());
  EXPECT_EQ(env.ProcessId(), getpid());
  const std::string exe = env.ExecutablePath();
  EXPECT_TRUE(std::filesystem::path(exe).is_absolute()) << exe;
  EXPECT_EQ(std::filesystem::path(exe).filename(), "env_test");

  ASSERT_EQ(setenv("TRAINLET_ENV_TEST", "a=b", 1), 0);
  const auto environment = env.Environment();
  EXPECT_NE(std::find(environment.begin(), environment.end(), "TRAINLET_ENV_TEST=a=b"),
            environment.end());
  unsetenv("TRAINLET_ENV_TEST");
}

TEST(RealEnvTest, CreateDirectoriesMakesEveryLevel) {
  TempDir dir;
  Env& env = RealEnv();
  const std::string deep = dir.File("a/b/c");
  ASSERT_TRUE(env.CreateDirectories(deep).ok());
  EXPECT_TRUE(std::filesystem::is_directory(deep));
  EXPECT_TRUE(env.CreateDirectories(deep).ok()) << "exists already: still OK";

  std::ofstream(dir.File("file")) << "x";
  const Status under_file = env.CreateDirectories(dir.File("file/sub"));
  EXPECT_FALSE(under_file.ok());
  EXPECT_NE(under_file.message().find(dir.File("file/sub")), std::string::npos)
      << under_file.message();
}

mode_t ModeOf(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

// Issue 19: the daemons' state dirs are private whatever the umask or the dir they were given.
TEST(MakePrivateDirectoryTest, Makes0700UnderUmaskZeroAndTightensLooserDirs) {
  TempDir dir;
  testing::ScopedUmask umask0(0);
  bool tightened = true;
  const std::string fresh = dir.File("a/b/state");
  ASSERT_TRUE(MakePrivateDirectory(fresh, &tightened).ok());
  EXPECT_EQ(ModeOf(fresh), 0700u);
  EXPECT_FALSE(tightened) << "a directory it created was not tightened";
  EXPECT_EQ(ModeOf(dir.File("a/b")), 0777u) << "only the directory itself is made private";

  const std::string loose = dir.File("given");
  ASSERT_EQ(mkdir(loose.c_str(), 0755), 0);
  ASSERT_TRUE(MakePrivateDirectory(loose, &tightened).ok());
  EXPECT_EQ(ModeOf(loose), 0700u);
  EXPECT_TRUE(tightened);
  ASSERT_TRUE(MakePrivateDirectory(loose, &tightened).ok());
  EXPECT_FALSE(tightened) << "already private";

  ASSERT_EQ(chmod(loose.c_str(), 0500), 0);  // stricter than 0700 is made 0700 too: writable
  ASSERT_TRUE(MakePrivateDirectory(loose, &tightened).ok());
  EXPECT_EQ(ModeOf(loose), 0700u);
  EXPECT_FALSE(tightened) << "no one else could enter it before either";

  std::ofstream(dir.File("file")) << "x";
  const Status on_file = MakePrivateDirectory(dir.File("file"));
  EXPECT_FALSE(on_file.ok());
  EXPECT_NE(on_file.message().find(dir.File("file")), std::string::npos) << on_file.message();
}

TEST(RealEnvTest, ReadFileHonoursTheCap) {
  TempDir dir;
  Env& env = RealEnv();
  std::ofstream(dir.File("f")) << "hello";
  Result<std::string> whole = env.ReadFile(dir.File("f"), 5);
  ASSERT_TRUE(whole.ok()) << whole.status().message();
  EXPECT_EQ(*whole, "hello");

  Result<std::string> capped = env.ReadFile(dir.File("f"), 4);
  ASSERT_FALSE(capped.ok());
  EXPECT_EQ(capped.status().code(), ErrorCode::kInvalid);

  Result<std::string> missing = env.ReadFile(dir.File("missing"), 100);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), ErrorCode::kNotFound);
  EXPECT_NE(missing.status().message().find(dir.File("missing")), std::string::npos);

  Result<std::string> directory = env.ReadFile(dir.path(), 100);
  EXPECT_FALSE(directory.ok());
}

TEST(RealEnvTest, WriteFileAtomicallyReplacesWithExactMode) {
  TempDir dir;
  Env& env = RealEnv();
  const std::string path = dir.File("state.json");
  const mode_t old_umask = umask(077);  // the mode asked for is kept whatever the umask
  Status first = env.WriteFileAtomically(path, "one", 0644);
  umask(old_umask);
  ASSERT_TRUE(first.ok()) << first.message();
  EXPECT_EQ(Slurp(path), "one");
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);

  ASSERT_TRUE(env.WriteFileAtomically(path, "two, longer", 0600).ok());
  EXPECT_EQ(Slurp(path), "two, longer");
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp")) << "the temporary is renamed away";
}

TEST(RealEnvTest, WriteFileAtomicallyFailsIntoAMissingDirectory) {
  TempDir dir;
  const std::string path = dir.File("no/such/dir/f");
  Status s = RealEnv().WriteFileAtomically(path, "x", 0644);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), ErrorCode::kNotFound);
  EXPECT_NE(s.message().find(path), std::string::npos) << s.message();
}

TEST(RealEnvTest, LockFileIsExclusiveUntilReleased) {
  TempDir dir;
  Env& env = RealEnv();
  const std::string path = dir.File("agent.lock");
  Result<std::unique_ptr<FileLock>> lock = env.LockFile(path);
  ASSERT_TRUE(lock.ok()) << lock.status().message();
  EXPECT_EQ((*lock)->path(), path);
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);

  // Another open file description cannot take it, even after the retries (about 1 s).
  const auto start = std::chrono::steady_clock::now();
  Result<std::unique_ptr<FileLock>> second = env.LockFile(path);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), ErrorCode::kExists);
  EXPECT_GE(std::chrono::steady_clock::now() - start,
            (Env::kLockAttempts - 1) * Env::kLockRetryInterval);

  lock->reset();
  Result<std::unique_ptr<FileLock>> third = env.LockFile(path);
  EXPECT_TRUE(third.ok()) << third.status().message();
}

TEST(RealEnvTest, TouchMovesTheLockedFilesStamp) {
  TempDir dir;
  const std::string path = dir.File("agent.lock");
  Result<std::unique_ptr<FileLock>> lock = RealEnv().LockFile(path);
  ASSERT_TRUE(lock.ok()) << lock.status().message();
  const timespec old_stamp{1000, 0};  // 1970: any Touch moves it forward
  const timespec times[2] = {old_stamp, old_stamp};
  ASSERT_EQ(utimensat(AT_FDCWD, path.c_str(), times, 0), 0);
  ASSERT_TRUE((*lock)->Touch().ok());
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_GT(st.st_mtim.tv_sec, 1000);
}

TEST(RealEnvTest, LockFileWaitsOutABriefSharedHolder) {
  // What trainlet-step does to see whether the agent lives: LOCK_SH for a moment.
  TempDir dir;
  const std::string path = dir.File("agent.lock");
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(flock(fd, LOCK_SH), 0);
  std::thread release([fd] {
    std::this_thread::sleep_for(100ms);
    flock(fd, LOCK_UN);
  });
  Result<std::unique_ptr<FileLock>> lock = RealEnv().LockFile(path);
  release.join();
  close(fd);
  EXPECT_TRUE(lock.ok()) << lock.status().message();
}

TEST(RealEnvTest, LockIsNotInheritedByChildren) {
  TempDir dir;
  const std::string path = dir.File("agent.lock");
  Result<std::unique_ptr<FileLock>> lock = RealEnv().LockFile(path);
  ASSERT_TRUE(lock.ok());
  // A child that outlives the lock holder's release must not keep the lock: O_CLOEXEC.
  ProcessSpawner::Request request;
  request.argv = {"/bin/sleep", "2"};
  Result<pid_t> child = RealEnv().processes().Spawn(request);
  ASSERT_TRUE(child.ok()) << child.status().message();
  lock->reset();
  const int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  EXPECT_EQ(flock(fd, LOCK_EX | LOCK_NB), 0) << "the child holds the lock";
  close(fd);
  RealEnv().processes().Kill(*child, SIGKILL);
  waitpid(*child, nullptr, 0);
}

TEST(RealEnvTest, ProcessesSpawnsAndSignals) {
  ProcessSpawner& processes = RealEnv().processes();
  ProcessSpawner::Request request;
  request.argv = {"/bin/sh", "-c", "exit 7"};
  Result<pid_t> pid = processes.Spawn(request);
  ASSERT_TRUE(pid.ok()) << pid.status().message();
  int status = 0;
  ASSERT_EQ(waitpid(*pid, &status, 0), *pid);
  EXPECT_EQ(WEXITSTATUS(status), 7);
  EXPECT_EQ(processes.Kill(*pid, 0), ESRCH);

  request.argv = {"/no/such/program"};
  Result<pid_t> missing = processes.Spawn(request);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), ErrorCode::kNotFound);
}

TEST(RealEnvTest, BecomesAChildSubreaper) {
  Status s = RealEnv().BecomeChildSubreaper();
#if defined(__linux__)
  ASSERT_TRUE(s.ok()) << s.message();
  int on = 0;
  ASSERT_EQ(prctl(PR_GET_CHILD_SUBREAPER, &on), 0);
  EXPECT_EQ(on, 1);
#else
  EXPECT_EQ(s.code(), ErrorCode::kUnavailable);
#endif
}

TEST(RealEnvTest, IsOneObject) { EXPECT_EQ(&RealEnv(), &RealEnv()); }

}  // namespace
}  // namespace trainlet::platform
