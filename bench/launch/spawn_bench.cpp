// trainlet-spawn-bench: N children of one program started from one thread and waited for, four
// ways, interleaved round by round on this machine: glibc's posix_spawn with the attributes
// ProcessSpawner used to pass it (stdin /dev/null, stdout and stderr a log, descriptors from 3
// closed, chdir, every signal default, an empty mask, a new process group; and for a bound rank
// the spawning thread's own affinity moved and restored around the call), VforkSpawn
// (common/platform/vfork_spawn.h: the child binds itself), and ProcessSpawner::Spawn as a rank
// gets it (program resolution and the Request included), and ProcessSpawner::Batch as the step
// starts its ranks (SpawnBatch: no child waited for until all are started). Prints the median ms
// of a round, and each against posix_spawn. See bench/README.md ("the spawn primitive").
//
//   trainlet-spawn-bench [--children 64] [--rounds 25] [--program /bin/true]
//                        [--cpus C | --round-robin]
//
// --cpus C: every child bound to CPU C; --round-robin: child i bound to the i-th of this thread's
// CPUs modulo their number (one rank per core: under posix_spawn the spawning thread moves to
// each child's CPU in turn); neither: every child bound to all of this thread's CPUs (64 ranks on
// 2 CPUs, where nothing moves).
#include <fcntl.h>
#include <sched.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "common/platform/cpu_affinity.h"
#include "common/platform/process_spawner.h"
#include "common/platform/vfork_spawn.h"

extern char** environ;

namespace trainlet::bench {
namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  int children = 64;
  int rounds = 25;
  std::string program = "/bin/true";
  int cpu = -1;
  bool round_robin = false;
};

double Ms(Clock::time_point since) {
  return std::chrono::duration<double, std::milli>(Clock::now() - since).count();
}

void WaitAll(const std::vector<pid_t>& pids) {
  for (pid_t p : pids) {
    int status = 0;
    while (p > 0 && waitpid(p, &status, 0) < 0 && errno == EINTR) {
    }
  }
}

// The CPUs child `i` is bound to.
std::vector<unsigned> CpusOf(const Options& opt, const std::vector<unsigned>& ours, size_t i) {
  if (opt.cpu >= 0) return {static_cast<unsigned>(opt.cpu)};
  if (opt.round_robin) return {ours[i % ours.size()]};
  return ours;
}

cpu_set_t MaskOf(const std::vector<unsigned>& cpus) {
  cpu_set_t mask;
  CPU_ZERO(&mask);
  for (unsigned c : cpus) CPU_SET(c, &mask);
  return mask;
}

double RoundPosixSpawn(const Options& opt, const std::vector<unsigned>& ours, int log) {
  std::vector<pid_t> pids(opt.children, -1);
  char* argv[] = {const_cast<char*>(opt.program.c_str()), nullptr};
  const auto start = Clock::now();
  for (size_t i = 0; i < pids.size(); ++i) {
    const std::vector<unsigned> cpus = CpusOf(opt, ours, i);
    pid_t& pid = pids[i];
    posix_spawn_file_actions_t actions;
    posix_spawnattr_t attr;
    posix_spawn_file_actions_init(&actions);
    posix_spawnattr_init(&attr);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&actions, log, 1);
    posix_spawn_file_actions_adddup2(&actions, log, 2);
    posix_spawn_file_actions_addclosefrom_np(&actions, 3);
    posix_spawn_file_actions_addchdir_np(&actions, "/");
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &all);
    posix_spawnattr_setpgroup(&attr, 0);
    posix_spawnattr_setflags(
        &attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
    platform::SavedAffinity saved;
    platform::BindThisThread(cpus, &saved);
    posix_spawn(&pid, opt.program.c_str(), &actions, &attr, argv, environ);
    platform::RestoreThisThread(saved);
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
  }
  WaitAll(pids);
  return Ms(start);
}

double RoundVforkSpawn(const Options& opt, const std::vector<unsigned>& ours, int log) {
  std::vector<pid_t> pids(opt.children, -1);
  char* argv[] = {const_cast<char*>(opt.program.c_str()), nullptr};
  const auto start = Clock::now();
  for (size_t i = 0; i < pids.size(); ++i) {
    const cpu_set_t mask = MaskOf(CpusOf(opt, ours, i));
    pid_t& pid = pids[i];
    platform::VforkSpawnPlan plan;
    plan.path = opt.program.c_str();
    plan.argv = argv;
    plan.envp = environ;
    plan.stdout_fd = log;
    plan.stderr_fd = log;
    plan.cwd = "/";
    plan.cpus = &mask;
    pid = platform::VforkSpawn(plan).pid;
  }
  WaitAll(pids);
  return Ms(start);
}

// A rank's request as the step makes it: this process's env, cwd /, stdout and stderr in `log`.
platform::ProcessSpawner::Request RankRequest(const Options& opt, int log) {
  platform::ProcessSpawner::Request request;
  request.argv = {opt.program};
  for (char** e = environ; *e != nullptr; ++e) request.envp.emplace_back(*e);
  request.cwd = "/";
  request.stdout_fd = log;
  request.stderr_fd = log;
  return request;
}

double RoundProcessSpawner(const Options& opt, const std::vector<unsigned>& ours, int log,
                           platform::ProcessSpawner& spawner) {
  platform::ProcessSpawner::Request request = RankRequest(opt, log);
  std::vector<pid_t> pids(opt.children, -1);
  const auto start = Clock::now();
  for (size_t i = 0; i < pids.size(); ++i) {
    request.cpus = CpusOf(opt, ours, i);
    trainlet::Result<pid_t> started = spawner.Spawn(request);
    pids[i] = started.ok() ? *started : -1;
  }
  WaitAll(pids);
  return Ms(start);
}

// The batch the step starts its ranks with: no child is waited for until all are started.
double RoundBatch(const Options& opt, const std::vector<unsigned>& ours, int log,
                  platform::ProcessSpawner& spawner) {
  platform::ProcessSpawner::Request request = RankRequest(opt, log);
  std::vector<pid_t> pids;
  const auto start = Clock::now();
  const auto batch = spawner.NewBatch();
  for (int i = 0; i < opt.children; ++i) {
    request.cpus = CpusOf(opt, ours, static_cast<size_t>(i));
    batch->Start(request);
  }
  for (const trainlet::Result<pid_t>& started : batch->Finish()) {
    pids.push_back(started.ok() ? *started : -1);
  }
  WaitAll(pids);
  return Ms(start);
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0
                   : (v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2);
}

}  // namespace
}  // namespace trainlet::bench

int main(int argc, char** argv) {
  using namespace trainlet::bench;
  Options opt;
  CLI::App app{"Starts N children of one program four ways, interleaved, and prints medians"};
  app.add_option("--children", opt.children, "children per round")->check(CLI::Range(1, 4096));
  app.add_option("--rounds", opt.rounds, "rounds (each way once per round)")
      ->check(CLI::Range(1, 10000));
  app.add_option("--program", opt.program, "absolute path of the program the children run");
  app.add_option("--cpus", opt.cpu, "bind every child to this one CPU (default: all of ours)")
      ->check(CLI::NonNegativeNumber);
  app.add_flag("--round-robin", opt.round_robin,
               "bind child i to the i-th of our CPUs, modulo their number (one rank per core)");
  CLI11_PARSE(app, argc, argv);
  if (opt.cpu >= 0 && opt.round_robin) {
    std::fprintf(stderr, "--cpus and --round-robin: choose one\n");
    return 2;
  }
  const std::vector<unsigned> ours = trainlet::platform::ThisThreadCpus();
  if (ours.empty()) {
    std::fprintf(stderr, "cannot read this thread's CPUs\n");
    return 1;
  }
  const int log = open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (log < 0) {
    std::perror("open /dev/null");
    return 1;
  }
  auto spawner = trainlet::platform::MakePosixProcessSpawner();
  std::vector<double> posix, vfork, process, batch;
  for (int r = 0; r < opt.rounds; ++r) {
    posix.push_back(RoundPosixSpawn(opt, ours, log));
    vfork.push_back(RoundVforkSpawn(opt, ours, log));
    process.push_back(RoundProcessSpawner(opt, ours, log, *spawner));
    batch.push_back(RoundBatch(opt, ours, log, *spawner));
  }
  const double base = Median(posix);
  std::printf("%d children of %s, %d rounds, bound to %s (median ms of a round)\n\n", opt.children,
              opt.program.c_str(), opt.rounds,
              opt.cpu >= 0      ? ("CPU " + std::to_string(opt.cpu)).c_str()
              : opt.round_robin ? "one of our CPUs each, round robin"
                                : "all our CPUs");
  std::printf("| way | median ms | x posix_spawn |\n| --- | ---: | ---: |\n");
  std::printf("| posix_spawn, the spawning thread bound and restored | %.2f | 1.00 |\n", base);
  std::printf("| VforkSpawn, the child binds itself | %.2f | %.2f |\n", Median(vfork),
              Median(vfork) / base);
  std::printf("| ProcessSpawner::Spawn (VforkSpawn on Linux) | %.2f | %.2f |\n", Median(process),
              Median(process) / base);
  std::printf("| ProcessSpawner::Batch (SpawnBatch on Linux: no wait per child) | %.2f | %.2f |\n",
              Median(batch), Median(batch) / base);
  close(log);
  return 0;
}
