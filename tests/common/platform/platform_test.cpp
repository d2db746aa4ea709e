// common/platform against the real kernel: what the daemons rely on from each class, whichever
// implementation this build compiled (Linux's own, or the portable one macOS shares).
#include <fcntl.h>
#if defined(__linux__)
#include <linux/fs.h>
#include <sys/ioctl.h>
#endif
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "common/platform/cpu_affinity.h"
#include "common/platform/descriptors.h"
#include "common/platform/directory_spread.h"
#include "common/platform/file_watch.h"
#include "common/platform/periodic_timer.h"
#include "common/platform/poll_set.h"
#include "common/platform/process_info.h"
#include "common/platform/process_watch.h"
#include "common/platform/signal_watch.h"
#include "common/platform/wake_event.h"

namespace trainlet::platform {
namespace {

using namespace std::chrono_literals;

bool Readable(int fd, int timeout_ms) {
  pollfd p{fd, POLLIN, 0};
  int rc;
  do {
    rc = poll(&p, 1, timeout_ms);
  } while (rc < 0 && errno == EINTR);
  return rc == 1;
}

bool CloseOnExec(int fd) { return (fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0; }
bool NonBlocking(int fd) { return (fcntl(fd, F_GETFL) & O_NONBLOCK) != 0; }

// A child running `argv` with `env`; the test reaps it.
pid_t Spawn(std::vector<std::string> argv, std::vector<std::string> env = {}) {
  std::vector<char*> args, envp;
  for (auto& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_t pid = 0;
  EXPECT_EQ(posix_spawn(&pid, args[0], nullptr, nullptr, args.data(), envp.data()), 0);
  return pid;
}

// Waits until `pid` has exited, leaving it a zombie (unreaped).
void WaitExitedUnreaped(pid_t pid) {
  siginfo_t info{};
  ASSERT_EQ(waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOWAIT), 0);
}

TEST(ProcessInfo, StartTimeNamesOneProcess) {
  const auto self = ProcessStartTime(getpid());
  ASSERT_TRUE(self.has_value());
  EXPECT_GT(*self, 0u);
  EXPECT_EQ(ProcessStartTime(getpid()), self);
  EXPECT_FALSE(IsZombie(getpid()));
  EXPECT_TRUE(SameProcessAlive(getpid(), *self));
  EXPECT_FALSE(SameProcessAlive(getpid(), *self + 1));
  EXPECT_FALSE(ProcessStartTime(99'999'999).has_value());  // above any pid_max
  EXPECT_FALSE(ProcessStartTime(0).has_value());
}

TEST(ProcessInfo, ZombieKeepsItsStartTimeButIsNotAlive) {
  const pid_t pid = Spawn({"/bin/sh", "-c", "exit 3"});
  WaitExitedUnreaped(pid);
  EXPECT_TRUE(IsZombie(pid));
  const auto start = ProcessStartTime(pid);
  ASSERT_TRUE(start.has_value());
  EXPECT_FALSE(SameProcessAlive(pid, *start));
  ASSERT_EQ(waitpid(pid, nullptr, 0), pid);
  EXPECT_FALSE(ProcessStartTime(pid).has_value());
  EXPECT_FALSE(IsZombie(pid));
}

TEST(ProcessInfo, ListsProcessesAndReadsTheirEnvironment) {
  const auto pids = ListProcesses();
  EXPECT_NE(std::find(pids.begin(), pids.end(), getpid()), pids.end());
  const pid_t pid = Spawn({"/bin/sleep", "30"}, {"TRAINLET_PLATFORM_TEST=tag-1", "A=b"});
  bool found = false;
  for (int i = 0; i < 200 && !found; ++i) {  // the exec may not have happened yet
    const auto env = ProcessEnvironment(pid);
    found =
        env && std::find(env->begin(), env->end(), "TRAINLET_PLATFORM_TEST=tag-1") != env->end();
    if (!found) std::this_thread::sleep_for(10ms);
  }
  EXPECT_TRUE(found);
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  EXPECT_FALSE(ProcessEnvironment(pid).has_value());
}

TEST(ProcessInfo, ExecutablePathIsThisTest) {
  const std::string exe = ExecutablePath();
  EXPECT_EQ(std::filesystem::path(exe).filename(), "platform_test");
  EXPECT_TRUE(std::filesystem::path(exe).is_absolute());
}

TEST(ProcessHandle, SignalsAndSeesTheExit) {
  const pid_t pid = Spawn({"/bin/sleep", "30"});
  const auto start = ProcessStartTime(pid);
  ASSERT_TRUE(start.has_value());
  ProcessHandle h = ProcessHandle::Open(pid, *start);
  ASSERT_TRUE(h.valid());
  EXPECT_FALSE(h.Exited());
  if (h.fd() >= 0) EXPECT_FALSE(Readable(h.fd(), 0));
  EXPECT_EQ(h.Signal(SIGTERM), 0);
  WaitExitedUnreaped(pid);
  EXPECT_TRUE(h.Exited());
  if (h.fd() >= 0) EXPECT_TRUE(Readable(h.fd(), 1000));
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM);
  EXPECT_EQ(h.Signal(SIGTERM), ESRCH);

  ProcessHandle moved = std::move(h);
  EXPECT_FALSE(h.valid());  // NOLINT(bugprone-use-after-move): moved-from is invalid by contract
  EXPECT_TRUE(moved.Exited());
}

TEST(ProcessHandle, RefusesAnotherProcessUnderThePid) {
  const auto self = ProcessStartTime(getpid());
  ASSERT_TRUE(self.has_value());
  ProcessHandle other = ProcessHandle::Open(getpid(), *self + 1);  // "an earlier process"
  EXPECT_FALSE(other.valid());
  EXPECT_TRUE(other.Exited());
  EXPECT_EQ(other.Signal(0), ESRCH);
  EXPECT_FALSE(ProcessHandle::Open(99'999'999, 1).valid());
}

TEST(SignalWatch, ReadsSignalsSentToTheProcess) {
  ASSERT_TRUE(PrepareSignals({SIGUSR1, SIGUSR2}).ok());
  auto opened = SignalWatch::Open({SIGUSR1, SIGUSR2});
  ASSERT_TRUE(opened.ok()) << opened.status().message();
  auto watch = std::move(opened).value();
  EXPECT_TRUE(watch->Take().empty());
  kill(getpid(), SIGUSR1);
  ASSERT_TRUE(Readable(watch->fd(), 2000));
  EXPECT_EQ(watch->Take(), std::vector<int>{SIGUSR1});
  kill(getpid(), SIGUSR2);
  ASSERT_TRUE(Readable(watch->fd(), 2000));
  EXPECT_EQ(watch->Take(), std::vector<int>{SIGUSR2});
  EXPECT_FALSE(Readable(watch->fd(), 0));
}

TEST(WakeEvent, TheOlderOpenShapeStillWorks) {
  // Open(std::string*) forwards to the Result form for callers not moved yet (agent/).
  std::string error = "untouched";
  auto wake = WakeEvent::Open(&error);
  ASSERT_NE(wake, nullptr) << error;
  EXPECT_EQ(error, "untouched");
}

TEST(WakeEvent, OutOfDescriptorsIsAnInternalErrorNamingTheCall) {
  rlimit old;
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &old), 0);
  rlimit none = old;
  none.rlim_cur = 0;  // every new descriptor fails with EMFILE
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &none), 0);
  auto opened = WakeEvent::Open();
  std::string error;
  auto legacy = WakeEvent::Open(&error);
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &old), 0);
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.status().code(), ErrorCode::kInternal);
  EXPECT_TRUE(opened.status().message().starts_with("eventfd: ") ||
              opened.status().message().starts_with("pipe: "))
      << opened.status().message();
  EXPECT_EQ(legacy, nullptr);
  EXPECT_EQ(error, opened.status().message());
}

TEST(WakeEvent, ReadableFromNotifyUntilDrain) {
  auto opened = WakeEvent::Open();
  ASSERT_TRUE(opened.ok()) << opened.status().message();
  auto wake = std::move(opened).value();
  EXPECT_TRUE(CloseOnExec(wake->fd()));
  EXPECT_FALSE(Readable(wake->fd(), 0));
  wake->Notify();
  wake->Notify();
  EXPECT_TRUE(Readable(wake->fd(), 0));
  wake->Drain();
  EXPECT_FALSE(Readable(wake->fd(), 0));
}

TEST(FileWatch, WakesOnAWriteWhereTheKernelTells) {
  auto opened = FileWatch::Open();
  ASSERT_TRUE(opened.ok()) << opened.status().message();
  auto watch = std::move(opened).value();
  const std::string path = testing::TempDir() + "/platform_test_watched";
  std::ofstream(path) << "";
  const int handle = watch->Add(path);
  ASSERT_GE(handle, 0) << std::strerror(errno);
  if (watch->fd() < 0) {
    GTEST_SKIP() << "changes are polled in this build (every " << FileWatch::kPollInterval.count()
                 << " ms, by the owner)";
  }
  EXPECT_FALSE(Readable(watch->fd(), 0));
  std::ofstream(path, std::ios::app) << "record\n";
  EXPECT_TRUE(Readable(watch->fd(), 2000));
  watch->Drain();
  EXPECT_FALSE(Readable(watch->fd(), 0));
  watch->Remove(handle);
  std::filesystem::remove(path);
}

TEST(PollSet, ReportsReadyMembersByTag) {
  auto opened = PollSet::Open();
  ASSERT_TRUE(opened.ok()) << opened.status().message();
  auto set = std::move(opened).value();
  int a[2], b[2];
  ASSERT_EQ(OpenPipe(a, Blocking::kNonBlocking), 0);
  ASSERT_EQ(OpenPipe(b, Blocking::kNonBlocking), 0);
  int tag_a = 0, tag_b = 0;
  ASSERT_EQ(set->Add(a[0], PollSet::kReadable, &tag_a), 0);
  ASSERT_EQ(set->Add(b[0], PollSet::kReadable, &tag_b), 0);
  EXPECT_FALSE(Readable(set->fd(), 0));
  EXPECT_TRUE(set->Ready(8).empty());
  ASSERT_EQ(write(b[1], "x", 1), 1);
  EXPECT_TRUE(Readable(set->fd(), 1000));
  auto ready = set->Ready(8);
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_EQ(ready[0].tag, &tag_b);
  EXPECT_TRUE(ready[0].events & PollSet::kReadable);
  // A write end waits for room; moving it between directions keeps its tag.
  ASSERT_EQ(set->Add(a[1], PollSet::kReadable, &tag_a), 0);
  ASSERT_EQ(set->Modify(a[1], PollSet::kWritable, &tag_a), 0);
  ready = set->Ready(8);
  EXPECT_TRUE(std::any_of(ready.begin(), ready.end(), [&](const PollSet::Event& e) {
    return e.tag == &tag_a && (e.events & PollSet::kWritable);
  }));
  set->Remove(a[1]);
  set->Remove(b[0]);
  for (int fd : {a[0], a[1], b[0], b[1]}) close(fd);
}

// Wait blocks on the set itself: for its timeout when nothing comes, until a member is ready.
TEST(PollSet, WaitBlocksUntilAMemberIsReady) {
  auto opened = PollSet::Open();
  ASSERT_TRUE(opened.ok()) << opened.status().message();
  auto set = std::move(opened).value();
  int p[2];
  ASSERT_EQ(OpenPipe(p, Blocking::kNonBlocking), 0);
  int tag = 0;
  ASSERT_EQ(set->Add(p[0], PollSet::kReadable, &tag), 0);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(set->Wait(8, 50).empty());
  EXPECT_GE(std::chrono::steady_clock::now() - start, 45ms);
  std::thread writer([&] {
    std::this_thread::sleep_for(20ms);
    EXPECT_EQ(write(p[1], "x", 1), 1);
  });
  const auto ready = set->Wait(8, -1);
  writer.join();
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_EQ(ready[0].tag, &tag);
  set->Remove(p[0]);
  close(p[0]);
  close(p[1]);
}

TEST(PeriodicTimer, FiresEveryPeriod) {
  auto opened = PeriodicTimer::Open(20ms);
  ASSERT_TRUE(opened.ok()) << opened.status().message();
  auto timer = std::move(opened).value();
  EXPECT_FALSE(timer->Consume());
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(Readable(timer->fd(), 2000));
    EXPECT_TRUE(timer->Consume());
  }
}

TEST(Descriptors, CloseOnExecAndNoSigpipe) {
  int p[2];
  ASSERT_EQ(OpenPipe(p), 0);
  EXPECT_TRUE(CloseOnExec(p[0]) && CloseOnExec(p[1]));
  EXPECT_FALSE(NonBlocking(p[0]));
  close(p[0]);
  close(p[1]);

  const int listener = OpenSocket(AF_INET, SOCK_STREAM, 0, Blocking::kNonBlocking);
  ASSERT_GE(listener, 0);
  EXPECT_TRUE(CloseOnExec(listener) && NonBlocking(listener));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(listen(listener, 4), 0);
  ASSERT_EQ(getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const int client = OpenSocket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(client, 0);
  ASSERT_EQ(connect(client, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_TRUE(Readable(listener, 2000));
  const int server = AcceptConnection(listener, Blocking::kNonBlocking);
  ASSERT_GE(server, 0);
  EXPECT_TRUE(CloseOnExec(server) && NonBlocking(server));
  EXPECT_TRUE(CloseOnExec(client) && !NonBlocking(client));
  close(server);
  // Writing to a closed peer fails with EPIPE (or ECONNRESET) instead of killing the test.
  ssize_t n = 0;
  for (int i = 0; i < 100 && n >= 0; ++i) {
    n = SendNoSignal(client, "x", 1, 0);
    if (n >= 0) std::this_thread::sleep_for(1ms);
  }
  EXPECT_LT(n, 0);
  EXPECT_TRUE(errno == EPIPE || errno == ECONNRESET) << std::strerror(errno);
  close(client);
  close(listener);
}

TEST(CpuAffinity, BindsAndRestores) {
  if (!CpuAffinitySupported()) {
    SavedAffinity saved;
    EXPECT_EQ(BindThisThread({0}, &saved), 0);  // a no-op, by contract
    GTEST_SKIP() << "no CPU affinity on this platform";
  }
  const std::vector<unsigned> mine = ThisThreadCpus();
  ASSERT_FALSE(mine.empty());
  SavedAffinity saved;
  ASSERT_EQ(BindThisThread({mine.back()}, &saved), 0);
  EXPECT_EQ(ThisThreadCpus(), std::vector<unsigned>{mine.back()});
  RestoreThisThread(saved);
  EXPECT_EQ(ThisThreadCpus(), mine);
  // Bound to exactly those already: nothing is set, and the restore leaves a later bind alone.
  SavedAffinity same;
  ASSERT_EQ(BindThisThread(mine, &same), 0);
  EXPECT_EQ(ThisThreadCpus(), mine);
  if (mine.size() > 1) {
    ASSERT_EQ(BindThisThread({mine.front()}, &saved), 0);
    RestoreThisThread(same);  // saved nothing: must not widen the thread again
    EXPECT_EQ(ThisThreadCpus(), std::vector<unsigned>{mine.front()});
    RestoreThisThread(saved);
  }
  EXPECT_EQ(ThisThreadCpus(), mine);
}

TEST(DirectorySpread, MarksTheDirectoryAndSaysWhyNot) {
  const std::string missing = "/nonexistent-trainlet-dir/logs";
  const Status why = SpreadSubdirectories(missing);
  EXPECT_FALSE(why.ok());
  EXPECT_NE(why.message().find(missing), std::string::npos) << why.message();

  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("spread-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const Status result = SpreadSubdirectories(dir.string());
#if defined(__linux__)
  if (!result.ok()) {
    std::filesystem::remove_all(dir);
    GTEST_SKIP() << "this file system has no FS_TOPDIR_FL: " << result.message();
  }
  const int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  int flags = 0;
  ASSERT_EQ(ioctl(fd, FS_IOC_GETFLAGS, &flags), 0);
  close(fd);
  EXPECT_NE(flags & FS_TOPDIR_FL, 0);
  EXPECT_TRUE(SpreadSubdirectories(dir.string()).ok());  // already set: still fine
#else
  EXPECT_FALSE(result.ok());
#endif
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace trainlet::platform
