// VforkSpawn and SpawnBatch (common/platform/vfork_spawn.h) against the real kernel: what the
// child gets, what the caller keeps, and each failure named by its step with nothing left behind,
// both ways (each test runs for both); and what only the batch does: many children through few
// stacks, answers in order, the caller's errno untouched. The contract
// as ProcessSpawner gives it to ranks is tested through the supervisor
// (tests/agent/worker_supervisor_test.cpp, rank_binding_test.cpp).
#include "common/platform/vfork_spawn.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/platform/cpu_affinity.h"
#include "common/platform/process_info.h"

namespace trainlet::platform {
namespace {

// Reads `fd` to its end.
std::string Drain(int fd) {
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = read(fd, buf, sizeof buf)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

int WaitExit(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

bool NoChildLeft() {
  errno = 0;
  return waitpid(-1, nullptr, WNOHANG) < 0 && errno == ECHILD;
}

// A shell that prints what the child got: its pid and process group, cwd, and whether stdin is
// /dev/null. Its signal state is read by a grep exec'd as the child itself (kSignals): a shell's
// own mask changes while it forks and waits for its commands.
constexpr const char* kReport =
    "echo pid=$$; echo pgrp=$(cut -d' ' -f5 /proc/$$/stat); echo cwd=$(pwd); "
    "echo stdin=$(readlink /proc/$$/fd/0)";

struct Spawned {
  VforkSpawnResult result;
  std::string output;
  int exit_code = -1;
};

// Which way a test spawns: VforkSpawn, or a SpawnBatch of one Start and its Finish.
enum class Way { kVfork, kBatch };

VforkSpawnResult SpawnOne(const VforkSpawnPlan& plan, Way way) {
  if (way == Way::kVfork) return VforkSpawn(plan);
  SpawnBatch batch;
  EXPECT_EQ(batch.Start(plan), 0u);
  std::vector<VforkSpawnResult> results = batch.Finish();
  EXPECT_EQ(results.size(), 1u);
  return results.empty() ? VforkSpawnResult{} : results[0];
}

Way g_way = Way::kVfork;  // the running test's parameter (SpawnWays sets it)

class SpawnWays : public ::testing::TestWithParam<Way> {
 protected:
  void SetUp() override { g_way = GetParam(); }
};

Spawned SpawnAndRead(VforkSpawnPlan plan, const std::vector<std::string>& args,
                     int out_fd_override = -1) {
  int pipe_fds[2];
  EXPECT_EQ(pipe2(pipe_fds, O_CLOEXEC), 0);
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  char* envp[] = {const_cast<char*>("PATH=/usr/bin:/bin"), nullptr};
  plan.argv = argv.data();
  plan.envp = envp;
  plan.stdout_fd = out_fd_override >= 0 ? out_fd_override : pipe_fds[1];
  plan.stderr_fd = plan.stdout_fd;
  Spawned s;
  s.result = SpawnOne(plan, g_way);
  close(pipe_fds[1]);
  if (out_fd_override < 0) s.output = Drain(pipe_fds[0]);
  close(pipe_fds[0]);
  if (s.result.pid > 0) s.exit_code = WaitExit(s.result.pid);
  return s;
}

std::string Field(const std::string& report, const std::string& name) {
  const size_t at = report.find(name);
  if (at == std::string::npos) return "<none>";
  const size_t start = at + name.size();
  std::string value = report.substr(start, report.find('\n', start) - start);
  value.erase(0, value.find_first_not_of(" \t"));
  return value;
}

TEST_P(SpawnWays, TheChildGetsItsGroupCwdCpusDefaultSignalsAndNoOtherDescriptor) {
  // The caller ignores one signal, blocks another and has an inheritable descriptor open.
  struct sigaction ignore {
  }, old_action{};
  ignore.sa_handler = SIG_IGN;
  ASSERT_EQ(sigaction(SIGUSR2, &ignore, &old_action), 0);
  sigset_t block, old_mask;
  sigemptyset(&block);
  sigaddset(&block, SIGTERM);
  ASSERT_EQ(pthread_sigmask(SIG_BLOCK, &block, &old_mask), 0);
  const int leaked = open("/dev/null", O_RDONLY);  // no O_CLOEXEC on purpose
  ASSERT_GE(leaked, 3);
  const std::vector<unsigned> mine = ThisThreadCpus();
  ASSERT_FALSE(mine.empty());
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(mine.back(), &one);

  VforkSpawnPlan plan;
  plan.path = "/bin/sh";
  plan.cwd = "/";
  plan.cpus = &one;
  Spawned s = SpawnAndRead(plan, {"sh", "-c", kReport});
  plan.path = "/bin/grep";  // the child's own CPUs, blocked and ignored signals
  Spawned status = SpawnAndRead(
      plan, {"grep", "-E", "^(Cpus_allowed_list|SigBlk|SigIgn):", "/proc/self/status"});
  plan.path = "/bin/ls";  // its own descriptors: 0-2 and the directory it reads, nothing of ours
  Spawned fds = SpawnAndRead(plan, {"ls", "/proc/self/fd"});

  sigset_t mask_after;
  pthread_sigmask(SIG_SETMASK, &old_mask, &mask_after);
  sigaction(SIGUSR2, &old_action, nullptr);
  close(leaked);
  ASSERT_GT(s.result.pid, 0) << s.result.err;
  EXPECT_EQ(s.exit_code, 0) << s.output;
  EXPECT_EQ(Field(s.output, "pid="), std::to_string(s.result.pid)) << s.output;
  EXPECT_EQ(Field(s.output, "pgrp="), std::to_string(s.result.pid)) << s.output;
  EXPECT_EQ(Field(s.output, "cwd="), "/");
  ASSERT_GT(status.result.pid, 0) << status.result.err;
  EXPECT_EQ(Field(status.output, "Cpus_allowed_list:"), std::to_string(mine.back()));
  EXPECT_EQ(std::stoull(Field(status.output, "SigBlk:"), nullptr, 16), 0u) << status.output;
  EXPECT_EQ(std::stoull(Field(status.output, "SigIgn:"), nullptr, 16) & 0x7fffffffull, 0u)
      << status.output;
  EXPECT_EQ(Field(s.output, "stdin="), "/dev/null");
  EXPECT_EQ(fds.output, "0\n1\n2\n3\n");
  // The caller kept its mask (SIGTERM still blocked at the restore) and its CPUs.
  EXPECT_EQ(sigismember(&mask_after, SIGTERM), 1);
  EXPECT_EQ(ThisThreadCpus(), mine);
}

TEST_P(SpawnWays, AnOutputDescriptorAmongZeroToTwoIsMovedBeforeItIsReplaced) {
  int pipe_fds[2];
  ASSERT_EQ(pipe2(pipe_fds, O_CLOEXEC), 0);
  const int saved_stdin = dup(STDIN_FILENO);
  ASSERT_GE(saved_stdin, 0);
  ASSERT_EQ(dup2(pipe_fds[1], STDIN_FILENO), STDIN_FILENO);  // the child's stdout is our fd 0
  close(pipe_fds[1]);
  VforkSpawnPlan plan;
  plan.path = "/bin/sh";
  Spawned s = SpawnAndRead(plan, {"sh", "-c", "echo out; echo err >&2; readlink /proc/$$/fd/0"},
                           STDIN_FILENO);
  dup2(saved_stdin, STDIN_FILENO);
  close(saved_stdin);
  ASSERT_GT(s.result.pid, 0) << s.result.err;
  EXPECT_EQ(Drain(pipe_fds[0]), "out\nerr\n/dev/null\n");
  close(pipe_fds[0]);
  EXPECT_EQ(s.exit_code, 0);
}

TEST_P(SpawnWays, EachFailureNamesItsStepAndLeavesNoChild) {
  ASSERT_TRUE(NoChildLeft());
  VforkSpawnPlan plan;
  plan.path = "/nonexistent/trainlet-no-such-program";
  Spawned missing = SpawnAndRead(plan, {"x"});
  EXPECT_EQ(missing.result.pid, -1);
  EXPECT_EQ(missing.result.stage, VforkSpawnStage::kExec);
  EXPECT_EQ(missing.result.err, ENOENT);
  EXPECT_TRUE(NoChildLeft());

  const std::string plain = ::testing::TempDir() + "/vfork-spawn-plain-" + std::to_string(getpid());
  const int made = open(plain.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ASSERT_GE(made, 0);
  close(made);
  plan.path = plain.c_str();  // no execute bit, for root too
  Spawned refused = SpawnAndRead(plan, {"x"});
  unlink(plain.c_str());
  EXPECT_EQ(refused.result.stage, VforkSpawnStage::kExec);
  EXPECT_EQ(refused.result.err, EACCES);

  plan.path = "/bin/true";
  plan.cwd = "/nonexistent/trainlet-no-such-dir";
  Spawned no_dir = SpawnAndRead(plan, {"true"});
  EXPECT_EQ(no_dir.result.stage, VforkSpawnStage::kChdir);
  EXPECT_EQ(no_dir.result.err, ENOENT);

  cpu_set_t none_here;
  CPU_ZERO(&none_here);
  CPU_SET(CPU_SETSIZE - 1, &none_here);
  plan.cwd = nullptr;
  plan.cpus = &none_here;
  Spawned unbindable = SpawnAndRead(plan, {"true"});
  EXPECT_EQ(unbindable.result.stage, VforkSpawnStage::kAffinity);
  EXPECT_EQ(unbindable.result.err, EINVAL);
  EXPECT_TRUE(NoChildLeft());
}

TEST_P(SpawnWays, ANewSessionLeadsItsOwnSession) {
  VforkSpawnPlan plan;
  plan.path = "/bin/sh";
  plan.new_session = true;
  Spawned s = SpawnAndRead(plan, {"sh", "-c", "echo sid=$(cut -d' ' -f6 /proc/$$/stat)"});
  ASSERT_GT(s.result.pid, 0);
  EXPECT_EQ(Field(s.output, "sid="), std::to_string(s.result.pid));
}

INSTANTIATE_TEST_SUITE_P(VforkSpawnAndSpawnBatch, SpawnWays,
                         ::testing::Values(Way::kVfork, Way::kBatch),
                         [](const ::testing::TestParamInfo<Way>& info) {
                           return info.param == Way::kVfork ? "VforkSpawn" : "SpawnBatch";
                         });

// More children than stacks: each waits for a free one; the answers come in Start's order, a
// failed one in its place, and every child ran its own argv.
TEST(SpawnBatch, ManyChildrenThroughTwoStacksAnswerInStartOrder) {
  ASSERT_TRUE(NoChildLeft());
  int pipe_fds[2];
  ASSERT_EQ(pipe2(pipe_fds, O_CLOEXEC), 0);
  constexpr int kChildren = 12;
  constexpr int kMissing = 5;  // this one's program does not exist
  std::vector<std::vector<std::string>> args;
  for (int i = 0; i < kChildren; ++i)
    args.push_back({"sh", "-c", "echo child-" + std::to_string(i)});
  std::vector<std::vector<char*>> argvs(kChildren);
  char* envp[] = {const_cast<char*>("PATH=/usr/bin:/bin"), nullptr};
  SpawnBatch batch(2);
  for (int i = 0; i < kChildren; ++i) {
    for (std::string& a : args[i]) argvs[i].push_back(a.data());
    argvs[i].push_back(nullptr);
    VforkSpawnPlan plan;
    plan.path = i == kMissing ? "/nonexistent/trainlet-no-such-program" : "/bin/sh";
    plan.argv = argvs[i].data();
    plan.envp = envp;
    plan.stdout_fd = pipe_fds[1];
    plan.stderr_fd = pipe_fds[1];
    EXPECT_EQ(batch.Start(plan), static_cast<size_t>(i));
  }
  const std::vector<VforkSpawnResult> results = batch.Finish();
  close(pipe_fds[1]);
  ASSERT_EQ(results.size(), static_cast<size_t>(kChildren));
  std::vector<std::string> expected;
  for (int i = 0; i < kChildren; ++i) {
    if (i == kMissing) {
      EXPECT_EQ(results[i].pid, -1);
      EXPECT_EQ(results[i].stage, VforkSpawnStage::kExec);
      EXPECT_EQ(results[i].err, ENOENT);
      continue;
    }
    ASSERT_GT(results[i].pid, 0) << "child " << i << ": " << results[i].err;
    EXPECT_EQ(WaitExit(results[i].pid), 0);
    expected.push_back("child-" + std::to_string(i));
  }
  std::vector<std::string> lines;
  std::istringstream out(Drain(pipe_fds[0]));
  close(pipe_fds[0]);
  for (std::string line; std::getline(out, line);) lines.push_back(line);
  std::sort(lines.begin(), lines.end());
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(lines, expected);
  EXPECT_TRUE(NoChildLeft());
  EXPECT_TRUE(batch.Finish().empty());  // a second Finish: nothing started since
}

// The children run on while the caller does: one that fails writes its report, never the
// caller's errno (glibc's wrappers would, and sigaction fails for glibc's own two signals).
TEST(SpawnBatch, ChildrenNeverWriteTheCallersErrno) {
  char* argv[] = {const_cast<char*>("true"), nullptr};
  char* envp[] = {nullptr};
  SpawnBatch batch;
  VforkSpawnPlan plan;
  plan.path = "/bin/true";
  plan.argv = argv;
  plan.envp = envp;
  plan.stdout_fd = plan.stderr_fd = STDERR_FILENO;
  plan.cwd = "/nonexistent/trainlet-no-such-dir";
  errno = 4242;
  for (int i = 0; i < 4; ++i) batch.Start(plan);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // they have failed by now
  EXPECT_EQ(errno, 4242);
  for (const VforkSpawnResult& r : batch.Finish()) {
    EXPECT_EQ(r.stage, VforkSpawnStage::kChdir);
    EXPECT_EQ(r.err, ENOENT);
  }
  EXPECT_TRUE(NoChildLeft());
}

// A batch dropped without Finish still waits for its children before its stacks go.
TEST(SpawnBatch, ADroppedBatchWaitsForItsChildren) {
  char* argv[] = {const_cast<char*>("true"), nullptr};
  char* envp[] = {nullptr};
  std::vector<pid_t> pids;
  {
    SpawnBatch batch(4);
    VforkSpawnPlan plan;
    plan.path = "/bin/true";
    plan.argv = argv;
    plan.envp = envp;
    plan.stdout_fd = plan.stderr_fd = STDERR_FILENO;
    for (int i = 0; i < 8; ++i) batch.Start(plan);
  }
  // Every child exec'ed or was reaped: what is left are exited /bin/true children to reap.
  for (pid_t p; (p = waitpid(-1, nullptr, 0)) > 0;) pids.push_back(p);
  EXPECT_EQ(pids.size(), 8u);
}

// The start time the batch gives is the one /proc gives (checked before the child is reaped,
// while /proc still has it); and the batch knows it nearly always.
TEST(SpawnBatch, AStartTimeKnownFromTheSpawnIsTheOneProcGives) {
  char* argv[] = {const_cast<char*>("true"), nullptr};
  char* envp[] = {nullptr};
  VforkSpawnPlan plan;
  plan.path = "/bin/true";
  plan.argv = argv;
  plan.envp = envp;
  plan.stdout_fd = plan.stderr_fd = STDERR_FILENO;
  std::vector<VforkSpawnResult> results;
  SpawnBatch batch(4);
  for (int i = 0; i < 40; ++i) batch.Start(plan);
  results = batch.Finish();
  int known = 0;
  for (const VforkSpawnResult& r : results) {
    ASSERT_GT(r.pid, 0) << r.err;
    const std::optional<uint64_t> proc = ProcessStartTime(r.pid);
    ASSERT_TRUE(proc.has_value()) << r.pid;
    if (r.start_ticks != 0) {
      ++known;
      EXPECT_EQ(r.start_ticks, *proc) << "pid " << r.pid;
    }
  }
  for (const VforkSpawnResult& r : results) WaitExit(r.pid);
  EXPECT_GE(known, 20);  // a tick passes during far fewer than half of 40 clones
  EXPECT_TRUE(NoChildLeft());
}

}  // namespace
}  // namespace trainlet::platform
