// WorkerSupervisor and PosixProcessSpawner against real processes (/bin/sh, sleep), plus pure
// Stop/Tick bookkeeping against a fake spawner. Like the agent, the test blocks SIGCHLD, SIGTERM
// and SIGINT, so the tests also show that workers do not inherit that mask.
#include "agent/worker_supervisor.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "agent/process_spawner.h"
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

// Forwards to the real spawner and records every signal sent.
class RecordingSpawner : public ProcessSpawner {
 public:
  Result<pid_t> Spawn(const Request& r) override { return real_->Spawn(r); }
  int Kill(pid_t target, int sig) override {
    kills.push_back({target, sig});
    return real_->Kill(target, sig);
  }
  int CountKills(pid_t target, int sig) const {
    int n = 0;
    for (const auto& [t, s] : kills) n += (t == target && s == sig);
    return n;
  }
  std::vector<std::pair<pid_t, int>> kills;

 private:
  std::unique_ptr<ProcessSpawner> real_ = MakePosixProcessSpawner();
};

// Starts nothing: hands out made-up pids, or fails when told to; records signals.
class FakeSpawner : public ProcessSpawner {
 public:
  Result<pid_t> Spawn(const Request& r) override {
    requests.push_back(r);
    if (fail_next) {
      fail_next = false;
      return UnavailableError("injected spawn failure: Resource temporarily unavailable");
    }
    return next_pid++;
  }
  int Kill(pid_t target, int sig) override {
    kills.push_back({target, sig});
    return 0;
  }
  int CountKills(pid_t target, int sig) const {
    int n = 0;
    for (const auto& [t, s] : kills) n += (t == target && s == sig);
    return n;
  }
  bool fail_next = false;
  pid_t next_pid = 4'000'001;  // above pid_max, so never a real process
  std::vector<Request> requests;
  std::vector<std::pair<pid_t, int>> kills;
};

class SupervisorTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { testing::BlockAgentSignals(); }

  void SetUp() override {
    char tmpl[] = "/tmp/trainlet-supervisor-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = fs::canonical(tmpl);
    base_env_ = {"PATH=/usr/bin:/bin", "HOME=" + dir_.string(), "LANG=C"};
  }

  void TearDown() override {
    if (sup_) {
      sup_->KillAllAndWait(5s);
      EXPECT_EQ(sup_->running(), 0u);
    }
    // Reap grandchildren that were re-parented to us while we were a subreaper.
    prctl(PR_SET_CHILD_SUBREAPER, 0);
    auto deadline = Clock::now() + 5s;
    while (Clock::now() < deadline) {
      pid_t p = waitpid(-1, nullptr, WNOHANG);
      if (p < 0) break;  // ECHILD: no child left
      if (p == 0) std::this_thread::sleep_for(2ms);
    }
    fs::remove_all(dir_);
  }

  WorkerSupervisor& Make(ProcessSpawner* spawner) {
    sup_ = std::make_unique<WorkerSupervisor>(spawner, base_env_);
    return *sup_;
  }

  WorkerLaunch Launch(std::vector<std::string> argv, uint32_t rank = 0) {
    WorkerLaunch l;
    l.job = "job-a";
    l.attempt = 1;
    l.rank = rank;
    l.local_rank = rank;
    l.argv = std::move(argv);
    l.log_path = (dir_ / "logs" / "job-a" / ("rank-" + std::to_string(rank) + ".log")).string();
    return l;
  }

  // Polls Reap() until `n` exits were collected or `timeout` passed.
  std::vector<WorkerExit> WaitExits(WorkerSupervisor& sup, size_t n,
                                    Clock::duration timeout = 10s) {
    std::vector<WorkerExit> all;
    auto deadline = Clock::now() + timeout;
    while (all.size() < n && Clock::now() < deadline) {
      for (auto& e : sup.Reap()) all.push_back(e);
      if (all.size() < n) std::this_thread::sleep_for(1ms);
    }
    return all;
  }

  // Waits until `path` contains `needle`; the child has reached that point of its script.
  static bool WaitForLog(const fs::path& path, const std::string& needle,
                         Clock::duration timeout = 10s) {
    auto deadline = Clock::now() + timeout;
    while (Clock::now() < deadline) {
      if (ReadFile(path).find(needle) != std::string::npos) return true;
      std::this_thread::sleep_for(2ms);
    }
    return false;
  }

  // The number after "grandchild=" in the log.
  static pid_t GrandchildPid(const fs::path& log) {
    std::string text = ReadFile(log);
    size_t at = text.find("grandchild=");
    if (at == std::string::npos) return -1;
    return static_cast<pid_t>(std::atoi(text.c_str() + at + 11));
  }

  // True once `pid` no longer exists. We are the subreaper, so the killed grandchild becomes our
  // child; `sup.Reap()` reaps it as an unknown child (a zombie would still answer kill(pid, 0)).
  static bool WaitGone(WorkerSupervisor& sup, pid_t pid, Clock::duration timeout = 10s) {
    auto deadline = Clock::now() + timeout;
    while (Clock::now() < deadline) {
      (void)sup.Reap();
      if (kill(pid, 0) != 0 && errno == ESRCH) return true;
      std::this_thread::sleep_for(2ms);
    }
    return false;
  }

  fs::path dir_;
  std::vector<std::string> base_env_;
  std::unique_ptr<ProcessSpawner> posix_ = MakePosixProcessSpawner();
  std::unique_ptr<WorkerSupervisor> sup_;
};

TEST_F(SupervisorTest, ExitCodeAndBothStreamsInLog) {
  mode_t old_umask = umask(022);
  auto& sup = Make(posix_.get());
  WorkerLaunch l = Launch({"/bin/sh", "-c", "echo out; echo err >&2; exit 3"});
  Result<pid_t> pid = sup.Start(l);
  umask(old_umask);
  ASSERT_TRUE(pid.ok()) << pid.status().ToString();
  EXPECT_TRUE(sup.IsRunning("job-a", 1, 0));
  EXPECT_EQ(sup.running(), 1u);
  EXPECT_EQ(sup.running("job-a"), 1u);
  EXPECT_EQ(sup.running("job-b"), 0u);

  auto exits = WaitExits(sup, 1);
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_EQ(exits[0].job, "job-a");
  EXPECT_EQ(exits[0].attempt, 1u);
  EXPECT_EQ(exits[0].rank, 0u);
  EXPECT_EQ(exits[0].pid, *pid);
  EXPECT_EQ(exits[0].exit_code, 3);
  EXPECT_EQ(exits[0].signal, 0);
  EXPECT_FALSE(sup.IsRunning("job-a", 1, 0));
  EXPECT_EQ(sup.running(), 0u);

  EXPECT_EQ(ReadFile(l.log_path), "out\nerr\n");
  struct stat st;
  ASSERT_EQ(stat(l.log_path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);  // the rank's output is its user's alone (issue 19)

  // A second run appends rather than truncates.
  l.attempt = 2;
  ASSERT_TRUE(sup.Start(l).ok());
  ASSERT_EQ(WaitExits(sup, 1).size(), 1u);
  EXPECT_EQ(ReadFile(l.log_path), "out\nerr\nout\nerr\n");
}

TEST_F(SupervisorTest, KilledBySignalReportsSignal) {
  auto& sup = Make(posix_.get());
  ASSERT_TRUE(sup.Start(Launch({"/bin/sh", "-c", "kill -USR1 $$; sleep 5"})).ok());
  auto exits = WaitExits(sup, 1);
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_EQ(exits[0].signal, SIGUSR1);
  EXPECT_EQ(exits[0].exit_code, 128 + SIGUSR1);
}

TEST_F(SupervisorTest, ChildGetsEmptyMaskDefaultDispositionsAndNoAgentFds) {
  // The test blocks SIGCHLD/TERM/INT (as the agent does); also ignore one signal and leave an
  // inheritable fd open, and check none of it reaches the worker.
  struct sigaction ign {
  }, old{};
  ign.sa_handler = SIG_IGN;
  ASSERT_EQ(sigaction(SIGUSR2, &ign, &old), 0);
  int leaked = open("/dev/null", O_RDONLY);  // no O_CLOEXEC on purpose
  ASSERT_GE(leaked, 3);

  auto& sup = Make(posix_.get());
  WorkerLaunch l = Launch({"/bin/grep", "-E", "^Sig(Blk|Ign)", "/proc/self/status"});
  Result<pid_t> a = sup.Start(l);
  WorkerLaunch l2 =
      Launch({"/bin/sh", "-c",
              "[ -e /proc/$$/fd/" + std::to_string(leaked) + " ] && echo leaked || echo clean"},
             1);
  Result<pid_t> b = sup.Start(l2);
  sigaction(SIGUSR2, &old, nullptr);
  close(leaked);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(WaitExits(sup, 2).size(), 2u);
  // Bits 0-30 are the standard signals 1-31. glibc's posix_spawn sets its own internal signals
  // (32 and 33, SIGCANCEL and SIGSETXID) to SIG_IGN in the child; that is glibc, not us.
  std::string status = ReadFile(l.log_path);
  auto mask = [&status](const std::string& field) {
    size_t at = status.find(field + ":\t");
    return at == std::string::npos ? ~0ull
                                   : std::stoull(status.substr(at + field.size() + 2), nullptr, 16);
  };
  EXPECT_EQ(mask("SigBlk"), 0u) << status;
  EXPECT_EQ(mask("SigIgn") & 0x7fffffffull, 0u) << status;
  EXPECT_EQ(ReadFile(l2.log_path), "clean\n");
}

TEST_F(SupervisorTest, EnvIsBaseEnvWithLaunchEnvOnTop) {
  ASSERT_EQ(setenv("TRAINLET_TEST_AGENT_ONLY", "1", 1), 0);  // in the agent, not in base_env
  base_env_.push_back("FOO=base");
  base_env_.push_back("KEEP=1");
  base_env_.push_back("KEEP=second");  // duplicate: the first wins, as with getenv
  auto& sup = Make(posix_.get());
  WorkerLaunch l = Launch({"/usr/bin/env"});
  l.env = {{"FOO", "over"}, {"TRAINLET_RANK", "0"}};
  ASSERT_TRUE(sup.Start(l).ok());
  ASSERT_EQ(WaitExits(sup, 1).size(), 1u);
  std::string out = ReadFile(l.log_path);
  EXPECT_EQ(out, "PATH=/usr/bin:/bin\nHOME=" + dir_.string() +
                     "\nLANG=C\nFOO=over\nKEEP=1\nTRAINLET_RANK=0\n");
  unsetenv("TRAINLET_TEST_AGENT_ONLY");

  WorkerLaunch bad = Launch({"/usr/bin/env"}, 1);
  bad.env = {{"A=B", "x"}};
  Result<pid_t> r = sup.Start(bad);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kInvalid);
}

TEST_F(SupervisorTest, CwdHonored) {
  fs::create_directories(dir_ / "work");
  auto& sup = Make(posix_.get());
  WorkerLaunch l = Launch({"/bin/sh", "-c", "pwd; cat marker"});
  l.cwd = (dir_ / "work").string();
  std::ofstream(dir_ / "work" / "marker") << "here\n";
  ASSERT_TRUE(sup.Start(l).ok());
  ASSERT_EQ(WaitExits(sup, 1).size(), 1u);
  EXPECT_EQ(ReadFile(l.log_path), (dir_ / "work").string() + "\nhere\n");

  WorkerLaunch missing = Launch({"/bin/true"}, 1);
  missing.cwd = (dir_ / "no-such-dir").string();
  Result<pid_t> r = sup.Start(missing);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kNotFound);
  EXPECT_NE(r.status().message().find("no-such-dir"), std::string::npos) << r.status().message();
  EXPECT_EQ(sup.running(), 0u);
}

TEST_F(SupervisorTest, BareProgramIsSearchedInTheWorkersPath) {
  fs::create_directories(dir_ / "bin");
  fs::path tool = dir_ / "bin" / "trainlet-test-tool";
  std::ofstream(tool) << "#!/bin/sh\necho from-tool \"$@\"\n";
  fs::permissions(tool, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec);
  // Not on the agent's PATH, only on the worker's.
  base_env_[0] = "PATH=" + (dir_ / "bin").string() + ":/usr/bin:/bin";
  auto& sup = Make(posix_.get());
  WorkerLaunch l = Launch({"trainlet-test-tool", "x"});
  ASSERT_TRUE(sup.Start(l).ok());
  ASSERT_EQ(WaitExits(sup, 1).size(), 1u);
  EXPECT_EQ(ReadFile(l.log_path), "from-tool x\n");
}

TEST_F(SupervisorTest, AgentPathIsNotUsed) {
  base_env_[0] = "PATH=" + (dir_ / "empty").string();
  auto& sup = Make(posix_.get());
  Result<pid_t> r =
      sup.Start(Launch({"sh", "-c", "true"}));  // on the agent's PATH, not the worker's
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(sup.running(), 0u);
}

TEST_F(SupervisorTest, NonexistentProgramIsAnErrorNamingIt) {
  auto& sup = Make(posix_.get());
  for (std::string prog : {"/nonexistent/trainlet-no-such-prog", "trainlet-no-such-prog"}) {
    Result<pid_t> r = sup.Start(Launch({prog}));
    ASSERT_FALSE(r.ok()) << prog;
    EXPECT_EQ(r.status().code(), ErrorCode::kNotFound);
    EXPECT_NE(r.status().message().find(prog), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find("No such file"), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find("rank 0"), std::string::npos) << r.status().message();
  }
  EXPECT_EQ(sup.running(), 0u);
  EXPECT_TRUE(sup.Reap().empty());
}

TEST_F(SupervisorTest, StopEscalatesToKillAfterGraceAndKillsGrandchildren) {
  ASSERT_EQ(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  RecordingSpawner spawner;
  auto& sup = Make(&spawner);
  WorkerLaunch l = Launch({"/bin/sh", "-c", "trap '' TERM; sleep 100 & echo grandchild=$!; wait"});
  Result<pid_t> pid = sup.Start(l);
  ASSERT_TRUE(pid.ok()) << pid.status().ToString();
  ASSERT_TRUE(WaitForLog(l.log_path, "grandchild="));  // the trap is in place
  pid_t grandchild = GrandchildPid(l.log_path);
  ASSERT_GT(grandchild, 0);

  Clock::time_point t0 = Clock::now();
  sup.Stop("job-a", 1, 200ms, t0);
  EXPECT_EQ(spawner.CountKills(-*pid, SIGTERM), 1);
  EXPECT_EQ(sup.Tick(t0), 200ms);
  EXPECT_EQ(spawner.CountKills(-*pid, SIGKILL), 0);

  // TERM is ignored: the worker survives the grace period.
  std::this_thread::sleep_for(100ms);
  EXPECT_TRUE(sup.Reap().empty());
  EXPECT_TRUE(sup.IsRunning("job-a", 1, 0));
  EXPECT_EQ(kill(grandchild, 0), 0);

  EXPECT_EQ(sup.Tick(t0 + 200ms), std::nullopt);
  EXPECT_EQ(spawner.CountKills(-*pid, SIGKILL), 1);
  auto exits = WaitExits(sup, 1);
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_EQ(exits[0].signal, SIGKILL);
  EXPECT_TRUE(WaitGone(sup, grandchild)) << "grandchild " << grandchild << " survived";
}

TEST_F(SupervisorTest, FinishedRankLeavesNoChildrenBehind) {
  ASSERT_EQ(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  RecordingSpawner spawner;
  auto& sup = Make(&spawner);
  WorkerLaunch l = Launch({"/bin/sh", "-c", "sleep 100 & echo grandchild=$!; exit 0"});
  Result<pid_t> pid = sup.Start(l);
  ASSERT_TRUE(pid.ok());
  auto exits = WaitExits(sup, 1);
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_EQ(exits[0].exit_code, 0);
  EXPECT_EQ(exits[0].signal, 0);
  EXPECT_EQ(spawner.CountKills(-*pid, SIGKILL), 1);
  pid_t grandchild = GrandchildPid(l.log_path);
  ASSERT_GT(grandchild, 0);
  EXPECT_TRUE(WaitGone(sup, grandchild)) << "grandchild " << grandchild << " survived";
}

TEST_F(SupervisorTest, ReapOnSignalfdAsTheLoopDoes) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGCHLD);
  int sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
  ASSERT_GE(sfd, 0);
  auto& sup = Make(posix_.get());
  ASSERT_TRUE(sup.Start(Launch({"/bin/sh", "-c", "exit 7"}, 0)).ok());
  ASSERT_TRUE(sup.Start(Launch({"/bin/sh", "-c", "exit 8"}, 1)).ok());
  std::vector<WorkerExit> exits;
  auto deadline = Clock::now() + 10s;
  while (exits.size() < 2 && Clock::now() < deadline) {
    pollfd p{sfd, POLLIN, 0};
    if (poll(&p, 1, 1000) <= 0) continue;
    signalfd_siginfo info;
    while (read(sfd, &info, sizeof(info)) == sizeof(info)) {
    }
    // SIGCHLD coalesces: one read may stand for both exits, so Reap() collects all.
    for (auto& e : sup.Reap()) exits.push_back(e);
  }
  close(sfd);
  ASSERT_EQ(exits.size(), 2u);
  int sum = exits[0].exit_code + exits[1].exit_code;
  EXPECT_EQ(sum, 15);
}

TEST_F(SupervisorTest, FailingSpawnRecordsNothing) {
  FakeSpawner spawner;
  auto& sup = Make(&spawner);
  spawner.fail_next = true;
  Result<pid_t> r = sup.Start(Launch({"/bin/true"}, 3));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kUnavailable);
  EXPECT_NE(r.status().message().find("rank 3"), std::string::npos);
  EXPECT_NE(r.status().message().find("injected"), std::string::npos);
  EXPECT_EQ(sup.running(), 0u);
  EXPECT_FALSE(sup.IsRunning("job-a", 1, 3));
  sup.Stop("job-a", 0, 1s, Clock::now());
  EXPECT_TRUE(spawner.kills.empty());
  EXPECT_EQ(sup.Tick(Clock::now()), std::nullopt);

  // The same rank can be started once the fault is gone.
  ASSERT_TRUE(sup.Start(Launch({"/bin/true"}, 3)).ok());
  EXPECT_TRUE(sup.IsRunning("job-a", 1, 3));
  sup_.reset();  // fake pids: nothing to kill
}

TEST_F(SupervisorTest, StartRejectsDuplicatesAndAttemptZero) {
  FakeSpawner spawner;
  auto& sup = Make(&spawner);
  ASSERT_TRUE(sup.Start(Launch({"/bin/true"}, 0)).ok());
  Result<pid_t> dup = sup.Start(Launch({"/bin/true"}, 0));
  ASSERT_FALSE(dup.ok());
  EXPECT_EQ(dup.status().code(), ErrorCode::kExists);
  WorkerLaunch zero = Launch({"/bin/true"}, 1);
  zero.attempt = 0;
  EXPECT_EQ(sup.Start(zero).status().code(), ErrorCode::kInvalid);
  EXPECT_EQ(sup.Start(Launch({}, 2)).status().code(), ErrorCode::kInvalid);
  EXPECT_EQ(spawner.requests.size(), 1u);
  sup_.reset();
}

TEST_F(SupervisorTest, StopSelectsAttemptsAndIsIdempotent) {
  FakeSpawner spawner;
  auto& sup = Make(&spawner);
  WorkerLaunch a1 = Launch({"/bin/true"}, 0);
  WorkerLaunch a2 = Launch({"/bin/true"}, 0);
  a2.attempt = 2;
  WorkerLaunch other = Launch({"/bin/true"}, 0);
  other.job = "job-b";
  pid_t p1 = *sup.Start(a1), p2 = *sup.Start(a2), pb = *sup.Start(other);
  Clock::time_point t0 = Clock::now();

  EXPECT_EQ(sup.Tick(t0), std::nullopt);
  sup.Stop("job-a", 2, 1000ms, t0);
  ASSERT_EQ(spawner.kills.size(), 1u);
  EXPECT_EQ(spawner.kills[0], std::make_pair(-p2, SIGTERM));

  // Again, later and with a longer grace: no second TERM and the deadline stays.
  sup.Stop("job-a", 2, 5000ms, t0 + 100ms);
  EXPECT_EQ(spawner.kills.size(), 1u);
  EXPECT_EQ(sup.Tick(t0 + 100ms), 900ms);
  // A shorter grace brings the SIGKILL forward. Deadlines are rounded up, never down.
  sup.Stop("job-a", 2, 300ms, t0 + 100ms);
  EXPECT_EQ(sup.Tick(t0 + 100ms + 500us), 300ms);

  // attempt 0: every attempt of job-a, nothing of job-b.
  sup.Stop("job-a", 0, 1000ms, t0 + 200ms);
  EXPECT_EQ(spawner.kills.size(), 2u);
  EXPECT_EQ(spawner.kills[1], std::make_pair(-p1, SIGTERM));
  EXPECT_EQ(sup.Tick(t0 + 200ms), 200ms);  // p2's deadline at t0+400ms comes first

  EXPECT_EQ(sup.Tick(t0 + 400ms), 800ms);
  EXPECT_EQ(spawner.kills.back(), std::make_pair(-p2, SIGKILL));
  EXPECT_EQ(sup.Tick(t0 + 1200ms), std::nullopt);
  EXPECT_EQ(spawner.kills.back(), std::make_pair(-p1, SIGKILL));
  EXPECT_EQ(spawner.kills.size(), 4u);

  // Already killed: Stop and Tick send nothing more. Grace 0 kills at once.
  sup.Stop("job-a", 0, 0ms, t0 + 2s);
  EXPECT_EQ(spawner.kills.size(), 4u);
  sup.Stop("job-b", 1, 0ms, t0 + 2s);
  EXPECT_EQ(spawner.kills.back(), std::make_pair(-pb, SIGKILL));
  EXPECT_EQ(sup.Tick(t0 + 3s), std::nullopt);
  EXPECT_EQ(sup.running(), 3u);  // stopping is not gone: exits still come from Reap()
  sup_.reset();
}

// A warned stop (preemption, drain --force; issue 14): the warning signal now, SIGTERM after
// its grace, SIGKILL the stop grace after that, each sent by Tick at its time; a stop that comes
// while the warning runs keeps its grace, and a SIGKILL-now stop still kills at once.
TEST_F(SupervisorTest, WarnedStopSignalsThenTermsThenKills) {
  FakeSpawner spawner;
  auto& sup = Make(&spawner);
  const pid_t p = *sup.Start(Launch({"/bin/true"}, 0));
  const pid_t q = *sup.Start(Launch({"/bin/true"}, 1));
  const Clock::time_point t0 = Clock::now();
  sup.Stop("job-a", 1, 500ms, t0, StopWarning{SIGUSR1, 2000ms});
  ASSERT_EQ(spawner.kills.size(), 2u);
  EXPECT_EQ(spawner.kills[0], std::make_pair(-p, SIGUSR1));
  EXPECT_EQ(spawner.kills[1], std::make_pair(-q, SIGUSR1));
  EXPECT_EQ(sup.Tick(t0), 2000ms);
  // A plain stop (the coordinator's, again) neither sends SIGTERM nor brings anything forward.
  sup.Stop("job-a", 1, 100ms, t0 + 100ms);
  EXPECT_EQ(spawner.kills.size(), 2u);
  EXPECT_EQ(sup.Tick(t0 + 1999ms), 1ms);
  EXPECT_EQ(spawner.kills.size(), 2u);
  // The grace ends: SIGTERM to both; SIGKILL follows the shortest stop grace asked (100 ms).
  EXPECT_EQ(sup.Tick(t0 + 2000ms), 100ms);
  ASSERT_EQ(spawner.kills.size(), 4u);
  EXPECT_EQ(spawner.CountKills(-p, SIGTERM), 1);
  EXPECT_EQ(spawner.CountKills(-q, SIGTERM), 1);
  EXPECT_EQ(sup.Tick(t0 + 2100ms), std::nullopt);
  EXPECT_EQ(spawner.CountKills(-p, SIGKILL), 1);
  EXPECT_EQ(spawner.CountKills(-q, SIGKILL), 1);
  EXPECT_EQ(spawner.kills.size(), 6u);

  // A SIGKILL-now stop during a warning kills at once, and no SIGTERM comes after.
  const pid_t r = *sup.Start(Launch({"/bin/true"}, 2));
  sup.Stop("job-a", 1, 500ms, t0 + 3s, StopWarning{SIGUSR2, 1000ms});
  EXPECT_EQ(spawner.kills.back(), std::make_pair(-r, SIGUSR2));
  sup.Stop("job-a", 1, 0ms, t0 + 3100ms);
  EXPECT_EQ(spawner.kills.back(), std::make_pair(-r, SIGKILL));
  EXPECT_EQ(sup.Tick(t0 + 5s), std::nullopt);
  EXPECT_EQ(spawner.CountKills(-r, SIGTERM), 0);
  sup_.reset();
}

// Warn alone sends the signal to the attempt's workers that are not stopping, and stops nothing.
TEST_F(SupervisorTest, WarnSignalsOnlyWorkersThatRun) {
  FakeSpawner spawner;
  auto& sup = Make(&spawner);
  const pid_t p = *sup.Start(Launch({"/bin/true"}, 0));
  WorkerLaunch other = Launch({"/bin/true"}, 0);
  other.attempt = 2;
  const pid_t q = *sup.Start(other);
  sup.Warn("job-a", 1, SIGUSR1);
  ASSERT_EQ(spawner.kills.size(), 1u);
  EXPECT_EQ(spawner.kills[0], std::make_pair(-p, SIGUSR1));
  EXPECT_EQ(sup.Tick(Clock::now()), std::nullopt);
  sup.Stop("job-a", 2, 1s, Clock::now());
  sup.Warn("job-a", 0, SIGUSR1);  // q stops already: it gets no warning
  EXPECT_EQ(spawner.CountKills(-q, SIGUSR1), 0);
  EXPECT_EQ(spawner.CountKills(-p, SIGUSR1), 2);
  sup_.reset();
}

TEST_F(SupervisorTest, KillAllAndWaitLeavesNoChildren) {
  auto& sup = Make(posix_.get());
  for (uint32_t rank = 0; rank < 4; ++rank) {
    ASSERT_TRUE(sup.Start(Launch({"/bin/sleep", "100"}, rank)).ok());
  }
  ASSERT_TRUE(sup.Start(Launch({"/bin/sh", "-c", "trap '' TERM; sleep 100"}, 4)).ok());
  EXPECT_EQ(sup.running(), 5u);
  auto exits = sup.KillAllAndWait(10s);
  EXPECT_EQ(exits.size(), 5u);
  for (const auto& e : exits) EXPECT_EQ(e.signal, SIGKILL);
  EXPECT_EQ(sup.running(), 0u);
  errno = 0;
  EXPECT_EQ(waitpid(-1, nullptr, WNOHANG), -1);
  EXPECT_EQ(errno, ECHILD);
}

// Not a pass/fail check: how long 64 spawns and reaps take on this machine.
TEST_F(SupervisorTest, MicroMeasureSpawn64True) {
  auto& sup = Make(posix_.get());
  auto t0 = Clock::now();
  for (uint32_t rank = 0; rank < 64; ++rank) {
    WorkerLaunch l = Launch({"/bin/true"}, rank);
    ASSERT_TRUE(sup.Start(l).ok());
  }
  auto t1 = Clock::now();
  auto exits = WaitExits(sup, 64);
  auto t2 = Clock::now();
  ASSERT_EQ(exits.size(), 64u);
  for (const auto& e : exits) EXPECT_EQ(e.exit_code, 0);
  auto us = [](auto d) { return std::chrono::duration_cast<std::chrono::microseconds>(d).count(); };
  std::printf(
      "[ measure  ] 64 x /bin/true: spawn %lld us (%lld us each), all reaped after %lld us\n",
      static_cast<long long>(us(t1 - t0)), static_cast<long long>(us(t1 - t0) / 64),
      static_cast<long long>(us(t2 - t0)));
}

// OpenWorkerLog is what lets trainlet-step open a rank's log itself and hand it to Spawn.
TEST(OpenWorkerLogTest, CreatesTheLogAndOptionallyItsDirectory) {
  const fs::path dir = fs::temp_directory_path() / ("owl-" + std::to_string(getpid()));
  fs::remove_all(dir);
  const std::string nested = (dir / "a" / "rank-0.log").string();

  // Without create_parent a missing directory is an Io error naming the file.
  Result<int> missing = OpenWorkerLog(nested, /*create_parent=*/false);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), ErrorCode::kIo);
  EXPECT_NE(missing.status().message().find(nested), std::string::npos);

  Result<int> fd = OpenWorkerLog(nested);
  ASSERT_TRUE(fd.ok()) << fd.status().ToString();
  EXPECT_GT(*fd, STDERR_FILENO);
  EXPECT_NE(fcntl(*fd, F_GETFD) & FD_CLOEXEC, 0);
  struct stat st {};
  ASSERT_EQ(fstat(*fd, &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u) << "a rank's log is its user's alone";

  // Both streams given: Spawn writes to them and never touches log_path.
  auto spawner = MakePosixProcessSpawner();
  ProcessSpawner::Request request;
  request.argv = {"/bin/sh", "-c", "echo out; echo err >&2"};
  request.envp = {"PATH=/bin:/usr/bin"};
  request.log_path = (dir / "not-a-dir" / "x" / "never.log").string();
  request.stdout_fd = *fd;
  request.stderr_fd = *fd;
  Result<pid_t> pid = spawner->Spawn(request);
  close(*fd);
  ASSERT_TRUE(pid.ok()) << pid.status().ToString();
  int status = 0;
  ASSERT_EQ(waitpid(*pid, &status, 0), *pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  std::ifstream in(nested);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(), "out\nerr\n");
  EXPECT_FALSE(fs::exists(dir / "not-a-dir"));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace trainlet::agent
