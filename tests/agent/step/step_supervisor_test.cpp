// WorkerSupervisor with steps: ranks started under a real trainlet-step process, stopped with a
// grace, their exit codes and signals kept, and re-adopted by a new supervisor over the same
// steps directory (what a restarted agent does). Like the agent, the test blocks SIGCHLD,
// SIGTERM and SIGINT.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "agent/process_spawner.h"
#include "agent/step/step_records.h"
#include "agent/worker_supervisor.h"
#include "common/platform/env.h"
#include "common/platform/process_info.h"
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

using testing::Alive;

class StepSupervisorTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { testing::BlockAgentSignals(); }

  void SetUp() override {
    char tmpl[] = "/tmp/trainlet-steps-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = fs::canonical(tmpl);
    options_ = testing::StepOptionsUnder(dir_);
  }

  void TearDown() override {
    if (sup_) {
      sup_->KillAllAndWait(5s);
      EXPECT_EQ(sup_->running(), 0u);
      sup_.reset();
    }
    auto deadline = Clock::now() + 5s;
    while (Clock::now() < deadline) {
      pid_t p = waitpid(-1, nullptr, WNOHANG);
      if (p < 0) break;
      if (p == 0) std::this_thread::sleep_for(2ms);
    }
    fs::remove_all(dir_);
  }

  WorkerSupervisor& Make() {
    sup_ = std::make_unique<WorkerSupervisor>(
        posix_.get(), std::vector<std::string>{"PATH=/usr/bin:/bin", "LANG=C"}, options_);
    return *sup_;
  }

  WorkerLaunch Launch(std::vector<std::string> argv, uint32_t rank) {
    WorkerLaunch l;
    l.job = "job-a";
    l.attempt = 1;
    l.rank = rank;
    l.local_rank = rank;
    l.argv = std::move(argv);
    l.log_path = (dir_ / "logs" / ("rank-" + std::to_string(rank) + ".log")).string();
    return l;
  }

  std::vector<WorkerExit> WaitExits(size_t n, Clock::duration timeout = 10s) {
    std::vector<WorkerExit> all;
    auto deadline = Clock::now() + timeout;
    while (all.size() < n && Clock::now() < deadline) {
      for (auto& e : sup_->Reap()) all.push_back(e);
      if (all.size() < n) std::this_thread::sleep_for(2ms);
    }
    std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.rank < b.rank; });
    return all;
  }

  size_t StepDirs() const {
    size_t n = 0;
    std::error_code ec;
    for ([[maybe_unused]] const auto& e : fs::directory_iterator(options_.steps_dir, ec)) ++n;
    return n;
  }

  // The pid of the (only) step process, from its events file.
  pid_t StepPid() const {
    for (const auto& e : fs::directory_iterator(options_.steps_dir)) {
      std::string events = ReadFile(e.path() / "events");
      std::vector<step::StepRecord> records;
      (void)step::ParseRecords(events, 0, &records);
      if (!records.empty()) return records[0].pid;
    }
    return -1;
  }

  // Acknowledges every exit as the coordinator would.
  void Deliver(const std::vector<WorkerExit>& exits) {
    for (const auto& e : exits) sup_->ExitReported(e, ++seq_);
    sup_->ReportsAcked(seq_);
  }

  fs::path dir_;
  WorkerSupervisor::Options options_;
  std::unique_ptr<ProcessSpawner> posix_ = MakePosixProcessSpawner();
  std::unique_ptr<WorkerSupervisor> sup_;
  uint64_t seq_ = 0;
};

TEST_F(StepSupervisorTest, ExitCodesSignalsAndLogsKept) {
  auto& sup = Make();
  auto started = sup.StartStep(
      {Launch({"/bin/sh", "-c", "echo out; echo err >&2; exit 3"}, 0),
       Launch({"/bin/sh", "-c", "kill -USR1 $$; sleep 5"}, 1), Launch({"/usr/bin/env"}, 2)},
      1s);
  ASSERT_EQ(started.size(), 3u);
  for (const auto& s : started) ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(StepDirs(), 1u);
  const pid_t step_pid = StepPid();
  ASSERT_GT(step_pid, 0);
  auto exits = WaitExits(3);
  ASSERT_EQ(exits.size(), 3u);
  EXPECT_EQ(exits[0].exit_code, 3);
  EXPECT_EQ(exits[0].signal, 0);
  EXPECT_EQ(exits[0].pid, *started[0]);
  EXPECT_EQ(exits[1].signal, SIGUSR1);
  EXPECT_EQ(exits[1].exit_code, 128 + SIGUSR1);
  EXPECT_EQ(exits[2].exit_code, 0);
  EXPECT_EQ(ReadFile(dir_ / "logs" / "rank-0.log"), "out\nerr\n");
  // The env is the supervisor's base env with the launch env on top, as for direct workers.
  EXPECT_EQ(ReadFile(dir_ / "logs" / "rank-2.log"), "PATH=/usr/bin:/bin\nLANG=C\n");
  EXPECT_EQ(sup.running(), 0u);

  // The step ends once every rank has; its record stays until the coordinator has the exits.
  auto deadline = Clock::now() + 5s;
  while (Alive(step_pid) && Clock::now() < deadline) std::this_thread::sleep_for(2ms);
  EXPECT_FALSE(Alive(step_pid));
  EXPECT_TRUE(sup.Reap().empty());
  EXPECT_EQ(sup.steps(), 1u);
  EXPECT_EQ(StepDirs(), 1u);
  Deliver(exits);
  EXPECT_EQ(sup.steps(), 0u);
  EXPECT_EQ(StepDirs(), 0u);
}

// After a step starts, the supervisor makes as many spare files as it had ranks, and seven more:
// two for the next step's own launch.json and events, one for its workspace note, four for the
// first file of each secret (agent/step/spare_files.h); the next step's new rank logs and those two
// files are the spares, renamed: the same inodes, none allocated while the launch waits.
TEST_F(StepSupervisorTest, RankLogsOfTheNextStepAreTheSpareFilesMadeAfterTheFirst) {
  auto& sup = Make();
  auto first = sup.StartStep({Launch({"/bin/true"}, 0), Launch({"/bin/true"}, 1)}, 1s);
  for (const auto& s : first) ASSERT_TRUE(s.ok()) << s.status().message();
  Deliver(WaitExits(2));
  const fs::path spare = dir_ / "spare-files";
  std::set<ino_t> made;
  const auto deadline = Clock::now() + 10s;
  while (made.size() < 9 && Clock::now() < deadline) {
    made.clear();
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(spare, ec)) {
      struct stat st {};
      if (e.is_regular_file() && stat(e.path().c_str(), &st) == 0) made.insert(st.st_ino);
    }
    if (made.size() < 9) std::this_thread::sleep_for(5ms);
  }
  ASSERT_EQ(made.size(), 9u);
  WorkerLaunch a = Launch({"/bin/sh", "-c", "echo second"}, 0);
  WorkerLaunch b = Launch({"/bin/true"}, 1);
  a.attempt = b.attempt = 2;
  a.log_path = (dir_ / "logs2" / "rank-0.log").string();
  b.log_path = (dir_ / "logs2" / "rank-1.log").string();
  auto second = sup.StartStep({a, b}, 1s);
  for (const auto& s : second) ASSERT_TRUE(s.ok()) << s.status().message();
  size_t step_files = 0;  // the second step's launch.json and events, while its dir is there
  for (const auto& d : fs::directory_iterator(options_.steps_dir)) {
    for (const char* name : {"launch.json", "events"}) {
      struct stat st {};
      if (stat((d.path() / name).c_str(), &st) == 0 && made.contains(st.st_ino)) ++step_files;
    }
  }
  EXPECT_EQ(step_files, 2u);
  Deliver(WaitExits(2));
  for (const std::string& log : {a.log_path, b.log_path}) {
    struct stat st {};
    ASSERT_EQ(stat(log.c_str(), &st), 0) << log;
    EXPECT_TRUE(made.contains(st.st_ino)) << log << " is a new inode, not a spare";
    EXPECT_EQ(st.st_mode & 0777, 0600u) << log;
  }
  EXPECT_EQ(ReadFile(a.log_path), "second\n");
}

// A step that is slow to report its ranks started (hundreds of ranks on a busy machine) keeps the
// caller's keepalive going about once a second, so the agent goes on heartbeating meanwhile.
TEST_F(StepSupervisorTest, KeepaliveRunsWhileASlowStepStarts) {
  const fs::path slow = dir_ / "slow-step.sh";
  {
    std::ofstream f(slow);
    f << "#!/bin/sh\nsleep 2.3\nexec " << options_.step_binary << " \"$@\"\n";
  }
  fs::permissions(slow, fs::perms::owner_all);
  options_.step_binary = slow.string();
  int calls = 0;
  options_.keepalive = [&calls] { ++calls; };
  auto& sup = Make();
  const auto t0 = Clock::now();
  auto started = sup.StartStep({Launch({"/bin/true"}, 0)}, 1s);
  ASSERT_EQ(started.size(), 1u);
  ASSERT_TRUE(started[0].ok()) << started[0].status().message();
  EXPECT_GE(Clock::now() - t0, 2s);
  EXPECT_GE(calls, 2) << "one keepalive per second of waiting";
  EXPECT_LE(calls, 4);
  EXPECT_EQ(WaitExits(1).size(), 1u);
}

TEST_F(StepSupervisorTest, BadLaunchesFailAloneOthersStart) {
  auto& sup = Make();
  auto started = sup.StartStep({Launch({"/bin/sleep", "5"}, 0),
                                Launch({"/nonexistent/trainlet-no-such-prog"}, 1), Launch({}, 2)},
                               1s);
  ASSERT_TRUE(started[0].ok());
  ASSERT_FALSE(started[1].ok());
  EXPECT_NE(started[1].status().message().find("trainlet-no-such-prog"), std::string::npos)
      << started[1].status().message();
  EXPECT_NE(started[1].status().message().find("rank 1"), std::string::npos);
  ASSERT_FALSE(started[2].ok());
  EXPECT_EQ(started[2].status().code(), ErrorCode::kInvalid);
  EXPECT_TRUE(sup.IsRunning("job-a", 1, 0));
  EXPECT_FALSE(sup.IsRunning("job-a", 1, 1));
  // Already running: a second step for the same rank is refused.
  auto again = sup.StartStep({Launch({"/bin/true"}, 0)}, 1s);
  EXPECT_EQ(again[0].status().code(), ErrorCode::kExists);
  EXPECT_EQ(sup.running(), 1u);
}

TEST_F(StepSupervisorTest, StopTermsThenKillsAfterGrace) {
  auto& sup = Make();
  auto started =
      sup.StartStep({Launch({"/bin/sh", "-c", "trap '' TERM; echo trapped; sleep 100 & wait"}, 0),
                     Launch({"/bin/sleep", "100"}, 1)},
                    10s);
  ASSERT_TRUE(started[0].ok() && started[1].ok());
  auto deadline = Clock::now() + 5s;
  while (ReadFile(dir_ / "logs" / "rank-0.log").find("trapped") == std::string::npos &&
         Clock::now() < deadline) {
    std::this_thread::sleep_for(2ms);
  }
  const auto t0 = Clock::now();
  sup.Stop("job-a", 1, 300ms, t0);
  EXPECT_EQ(sup.Tick(t0), 300ms);
  // sleep dies of the TERM; the trapping shell outlives it.
  auto first = WaitExits(1, 3s);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].rank, 1u);
  EXPECT_EQ(first[0].signal, SIGTERM);
  EXPECT_TRUE(sup.IsRunning("job-a", 1, 0));
  // The agent's grace runs out: the step SIGKILLs the group.
  EXPECT_EQ(sup.Tick(t0 + 300ms), std::nullopt);
  auto second = WaitExits(1, 3s);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].rank, 0u);
  EXPECT_EQ(second[0].signal, SIGKILL);
}

TEST_F(StepSupervisorTest, StepEscalatesOnItsOwnWithoutAnAgent) {
  auto& sup = Make();
  auto started = sup.StartStep({Launch({"/bin/sh", "-c",
                                        "trap '' TERM; echo trapped; "
                                        "while :; do sleep 0.05; done"},
                                       0)},
                               200ms);
  ASSERT_TRUE(started[0].ok());
  auto deadline = Clock::now() + 5s;
  while (ReadFile(dir_ / "logs" / "rank-0.log").find("trapped") == std::string::npos &&
         Clock::now() < deadline) {
    std::this_thread::sleep_for(2ms);
  }
  sup.Stop("job-a", 1, 200ms, Clock::now());
  sup_.reset();  // the agent goes away before its grace runs out
  std::this_thread::sleep_for(600ms);
  EXPECT_FALSE(Alive(*started[0]));
  auto& again = Make();
  auto adopted = again.AdoptSteps();
  ASSERT_EQ(adopted.size(), 1u);
  EXPECT_EQ(adopted[0].exited, 1u);
  auto exits = WaitExits(1);
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_EQ(exits[0].signal, SIGKILL);
  EXPECT_EQ(exits[0].pid, *started[0]);
}

// An agent that is stopped (SIGSTOP) or hung still holds its lock, so the lock alone says it
// lives; but it stops nothing, and the coordinator restarts the job elsewhere. Its stamp on the
// lock stands still, and the step stops the ranks itself after the orphan grace (issue 19,
// defect 2). While the stamp moves, the ranks run on.
TEST_F(StepSupervisorTest, StepStopsRanksOfAnAgentThatHoldsItsLockButStopsStamping) {
  const std::string lock_path = (dir_ / "agent.lock").string();
  auto lock = platform::RealEnv().LockFile(lock_path);
  ASSERT_TRUE(lock.ok()) << lock.status().message();
  options_.agent_lock = lock_path;
  options_.orphan_grace = 400ms;
  options_.agent_stamps = true;
  auto& sup = Make();
  auto started = sup.StartStep({Launch({"/bin/sleep", "100"}, 0)}, 5s);
  ASSERT_TRUE(started[0].ok());
  // Stamped every 100 ms for three times the grace: the ranks keep running.
  for (auto until = Clock::now() + 1200ms; Clock::now() < until;) {
    ASSERT_TRUE((*lock)->Touch().ok());
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_TRUE(Alive(*started[0]));
  EXPECT_TRUE(sup.Reap().empty());
  // The stamp stands still (the agent is stopped), the lock is still held: SIGTERM after the
  // grace, not before.
  const auto stopped_at = Clock::now();
  auto exits = WaitExits(1, 5s);
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_EQ(exits[0].signal, SIGTERM);
  EXPECT_GE(Clock::now() - stopped_at, 300ms);
  EXPECT_NE(ReadFile(fs::path(options_.steps_dir) / "job-a.1" / "step.log").find("stopped or hung"),
            std::string::npos);
}

TEST_F(StepSupervisorTest, ReadoptedAfterTheSupervisorIsRecreated) {
  auto& sup = Make();
  auto started =
      sup.StartStep({Launch({"/bin/sh", "-c", "sleep 0.3; exit 7"}, 0),
                     Launch({"/bin/sh", "-c", "trap 'exit 5' TERM; sleep 100 & wait"}, 1),
                     Launch({"/bin/sh", "-c", "exit 2"}, 2)},
                    5s);
  for (const auto& s : started) ASSERT_TRUE(s.ok()) << s.status().message();
  // Rank 2's exit is read, reported, but never acknowledged: it must come again.
  auto early = WaitExits(1);
  ASSERT_EQ(early.size(), 1u);
  EXPECT_EQ(early[0].rank, 2u);
  sup.ExitReported(early[0], 1);
  sup_.reset();  // "kill -9 the agent": the step and its ranks run on

  std::this_thread::sleep_for(500ms);  // rank 0 exits while nobody watches
  EXPECT_TRUE(Alive(*started[1]));

  auto& sup2 = Make();
  auto adopted = sup2.AdoptSteps();
  ASSERT_EQ(adopted.size(), 1u);
  EXPECT_EQ(adopted[0].job, "job-a");
  EXPECT_EQ(adopted[0].attempt, 1u);
  EXPECT_EQ(adopted[0].stop_grace_ms, 5000u);
  EXPECT_TRUE(adopted[0].step_alive);
  EXPECT_EQ(adopted[0].running, 1u);
  EXPECT_EQ(adopted[0].exited, 2u);
  auto running = sup2.Running();
  ASSERT_EQ(running.size(), 1u);
  EXPECT_EQ(running[0].rank, 1u);
  EXPECT_EQ(running[0].pid, *started[1]);  // the same process, not a new one
  // Counted in place: of the attempt, of every attempt (0), and none of another job or attempt.
  EXPECT_EQ(sup2.RunningOf("job-a", 1), 1u);
  EXPECT_EQ(sup2.RunningOf("job-a", 0), 1u);
  EXPECT_EQ(sup2.RunningOf("job-a", 2), 0u);
  EXPECT_EQ(sup2.RunningOf("job-b", 0), 0u);
  // ... still the child of the step, not of the supervisor.
  std::string stat = ReadFile("/proc/" + std::to_string(*started[1]) + "/stat");
  std::istringstream fields(stat.substr(stat.rfind(')') + 2));
  std::string state;
  pid_t ppid = 0;
  fields >> state >> ppid;
  EXPECT_EQ(ppid, StepPid());

  auto exits = WaitExits(2);
  ASSERT_EQ(exits.size(), 2u);
  EXPECT_EQ(exits[0].rank, 0u);
  EXPECT_EQ(exits[0].exit_code, 7);
  EXPECT_EQ(exits[0].pid, *started[0]);
  EXPECT_EQ(exits[1].rank, 2u);
  EXPECT_EQ(exits[1].exit_code, 2);

  // The adopted step is stopped through its process handle; the rank's exit code comes through.
  sup2.Stop("job-a", 1, 5s, Clock::now());
  auto last = WaitExits(1);
  ASSERT_EQ(last.size(), 1u);
  EXPECT_EQ(last[0].exit_code, 5);
  exits.push_back(last[0]);
  Deliver(exits);
  auto deadline = Clock::now() + 5s;
  while (sup2.steps() != 0 && Clock::now() < deadline) {
    (void)sup2.Reap();
    std::this_thread::sleep_for(5ms);
  }
  EXPECT_EQ(sup2.steps(), 0u);
  EXPECT_EQ(StepDirs(), 0u);
}

TEST_F(StepSupervisorTest, DeadStepEndsItsRanksWithUnknownStatus) {
  auto& sup = Make();
  auto started = sup.StartStep({Launch({"/bin/sleep", "100"}, 0)}, 1s);
  ASSERT_TRUE(started[0].ok());
  const pid_t step_pid = StepPid();
  ASSERT_EQ(kill(step_pid, SIGKILL), 0);
  auto exits = WaitExits(1);
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_EQ(exits[0].exit_code, 255);
  EXPECT_EQ(exits[0].message, "step process died; exit status unknown");
  auto deadline = Clock::now() + 5s;
  while (Alive(*started[0]) && Clock::now() < deadline) std::this_thread::sleep_for(2ms);
  EXPECT_FALSE(Alive(*started[0])) << "the orphaned rank was not ended";
}

TEST_F(StepSupervisorTest, StepDiedWhileNoAgentRan) {
  auto& sup = Make();
  auto started = sup.StartStep({Launch({"/bin/sleep", "100"}, 0)}, 1s);
  ASSERT_TRUE(started[0].ok());
  const pid_t step_pid = StepPid();
  sup_.reset();
  ASSERT_EQ(kill(step_pid, SIGKILL), 0);
  while (waitpid(step_pid, nullptr, 0) < 0 && errno == EINTR) {
  }
  auto& again = Make();
  auto adopted = again.AdoptSteps();
  ASSERT_EQ(adopted.size(), 1u);
  EXPECT_FALSE(adopted[0].step_alive);
  auto exits = WaitExits(1);
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_EQ(exits[0].message, "step process died; exit status unknown");
  auto deadline = Clock::now() + 5s;
  while (Alive(*started[0]) && Clock::now() < deadline) std::this_thread::sleep_for(2ms);
  EXPECT_FALSE(Alive(*started[0]));
}

TEST_F(StepSupervisorTest, CorruptStepFilesAreReportedNotFatal) {
  // A rank whose recorded start time is not its own must not be signalled: it is another process.
  pid_t bystander = fork();
  if (bystander == 0) {
    pause();
    _exit(0);
  }
  fs::create_directories(options_.steps_dir + "/job-b.1");
  fs::create_directories(options_.steps_dir + "/junk");
  std::ofstream(options_.steps_dir + "/job-b.1/launch.json")
      << R"({"version":1,"job":"job-b","attempt":1,"stop_grace_ms":5,"base_env":[],"ranks":[]})";
  std::ofstream(options_.steps_dir + "/job-b.1/events")
      << "H 1 99999991 1\nS 0 " << bystander
      << " 1\nS 1 99999992 1\nX 1 99999992 0 0\n\x01garbage\n";
  std::ofstream(options_.steps_dir + "/junk/launch.json") << "{";
  auto& sup = Make();
  auto adopted = sup.AdoptSteps();
  ASSERT_EQ(adopted.size(), 1u);
  EXPECT_FALSE(adopted[0].step_alive);
  auto exits = WaitExits(2);
  ASSERT_EQ(exits.size(), 2u);
  EXPECT_EQ(exits[0].rank, 0u);
  EXPECT_EQ(exits[0].exit_code, 255);
  EXPECT_EQ(exits[1].rank, 1u);
  EXPECT_EQ(exits[1].exit_code, 0);
  EXPECT_TRUE(Alive(bystander));
  kill(bystander, SIGKILL);
  waitpid(bystander, nullptr, 0);
  EXPECT_TRUE(fs::exists(options_.steps_dir + "/junk"));  // left for a person to look at
}

TEST_F(StepSupervisorTest, ShutdownChoices) {
  auto& sup = Make();
  auto started = sup.StartStep({Launch({"/bin/sleep", "100"}, 0)}, 1s);
  ASSERT_TRUE(started[0].ok());
  WorkerLaunch direct = Launch({"/bin/sleep", "100"}, 1);
  direct.job = "exec";
  auto direct_pid = sup.Start(direct);
  ASSERT_TRUE(direct_pid.ok());
  // A restart: the direct worker ends, the step's rank does not.
  auto exits = sup.KillDirectAndWait(5s);
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_EQ(exits[0].pid, *direct_pid);
  EXPECT_TRUE(Alive(*started[0]));
  // A full stop: everything ends, the step process too.
  const pid_t step_pid = StepPid();
  exits = sup.KillAllAndWait(5s);
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_EQ(exits[0].signal, SIGKILL);
  EXPECT_FALSE(Alive(*started[0]));
  EXPECT_FALSE(Alive(step_pid));
}

// ---- Warnings before a stop (preemption, drain --force; issue 14) ----

// The first moment `text` is in rank `rank`'s log, polled every 2 ms up to `timeout`.
std::optional<Clock::time_point> SeenAt(const fs::path& log, const std::string& text,
                                        Clock::duration timeout) {
  const auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    if (ReadFile(log).find(text) != std::string::npos) return Clock::now();
    std::this_thread::sleep_for(2ms);
  }
  return std::nullopt;
}

// A rank that notes each signal and never exits by itself, and one that checkpoints on SIGUSR1.
constexpr char kNotesSignals[] =
    "trap 'echo usr1' USR1; trap 'echo term' TERM; echo ready; while :; do sleep 0.02; done";
constexpr char kCheckpointsOnUsr1[] =
    "trap 'echo checkpoint; exit 0' USR1; echo ready; while :; do sleep 0.02; done";

// The step runs the sequence itself: SIGUSR1 now, SIGTERM after the warning grace, SIGKILL after
// the stop grace; a rank that exits in the warning grace is done with its own status. No Tick is
// called: nothing of the sequence depends on the agent.
TEST_F(StepSupervisorTest, WarnedStopSendsTheSignalThenTermThenKill) {
  auto& sup = Make();
  auto started = sup.StartStep({Launch({"/bin/sh", "-c", kNotesSignals}, 0),
                                Launch({"/bin/sh", "-c", kCheckpointsOnUsr1}, 1)},
                               400ms);
  ASSERT_TRUE(started[0].ok() && started[1].ok());
  const fs::path log0 = dir_ / "logs" / "rank-0.log", log1 = dir_ / "logs" / "rank-1.log";
  ASSERT_TRUE(SeenAt(log0, "ready", 5s) && SeenAt(log1, "ready", 5s));

  const auto t0 = Clock::now();
  sup.Stop("job-a", 1, 400ms, t0, StopWarning{SIGUSR1, 700ms});
  // The rank that checkpoints exits 0 within the grace, before any SIGTERM.
  auto first = WaitExits(1, 3s);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].rank, 1u);
  EXPECT_EQ(first[0].exit_code, 0);
  EXPECT_EQ(first[0].signal, 0);  // a SIGTERM would have killed it: it exited within the grace
  EXPECT_NE(ReadFile(log1).find("checkpoint"), std::string::npos);
  // The other heard SIGUSR1 at once, SIGTERM only once the warning grace ran out ...
  auto usr1 = SeenAt(log0, "usr1", 3s);
  ASSERT_TRUE(usr1);
  EXPECT_LT(*usr1 - t0, 650ms);
  auto term = SeenAt(log0, "term", 3s);
  ASSERT_TRUE(term);
  EXPECT_GE(*term - t0, 650ms);
  EXPECT_LT(*term - t0, 3s);
  EXPECT_TRUE(sup.IsRunning("job-a", 1, 0));
  // ... and SIGKILL from the step after the stop grace.
  auto second = WaitExits(1, 3s);
  const auto killed_at = Clock::now();
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].rank, 0u);
  EXPECT_EQ(second[0].signal, SIGKILL);
  EXPECT_GE(killed_at - *term, 250ms);  // the stop grace is 400 ms; both times are polled
  EXPECT_EQ(ReadFile(log1).find("term"), std::string::npos);
}

// The agent goes away during the grace: the step finishes the stop on its own, and the next
// agent's stop of the same attempt does not cut the promised grace short.
TEST_F(StepSupervisorTest, WarnedStopSurvivesTheAgent) {
  auto& sup = Make();
  auto started = sup.StartStep({Launch({"/bin/sh", "-c", kNotesSignals}, 0)}, 300ms);
  ASSERT_TRUE(started[0].ok());
  const fs::path log0 = dir_ / "logs" / "rank-0.log";
  ASSERT_TRUE(SeenAt(log0, "ready", 5s));
  const auto t0 = Clock::now();
  sup.Stop("job-a", 1, 300ms, t0, StopWarning{SIGUSR1, 800ms});
  ASSERT_TRUE(SeenAt(log0, "usr1", 3s));
  sup_.reset();  // the agent dies during the warning grace

  auto& again = Make();
  ASSERT_EQ(again.AdoptSteps().size(), 1u);
  const auto now = Clock::now();
  again.Stop("job-a", 1, 300ms, now);  // the coordinator's stop of a stale attempt
  auto next = again.Tick(now);
  ASSERT_TRUE(next);
  EXPECT_GT(*next, 300ms + (800ms - (now - t0)) - 100ms) << "the warning grace was cut short";
  auto term = SeenAt(log0, "term", 3s);
  ASSERT_TRUE(term);
  EXPECT_GE(*term - t0, 750ms);
  auto exits = WaitExits(1, 3s);
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_EQ(exits[0].signal, SIGKILL);
}

// A warning alone (before an active deadline): the signal reaches the ranks, nothing stops.
TEST_F(StepSupervisorTest, WarningAloneStopsNothing) {
  auto& sup = Make();
  auto started = sup.StartStep(
      {Launch({"/bin/sh", "-c", "trap 'echo usr2' USR2; echo ready; while :; do sleep 0.02; done"},
              0)},
      300ms);
  ASSERT_TRUE(started[0].ok());
  const fs::path log0 = dir_ / "logs" / "rank-0.log";
  ASSERT_TRUE(SeenAt(log0, "ready", 5s));
  sup.Warn("job-a", 1, SIGUSR2);
  ASSERT_TRUE(SeenAt(log0, "usr2", 3s));
  std::this_thread::sleep_for(300ms);
  EXPECT_TRUE(Alive(*started[0]));
  EXPECT_TRUE(sup.Reap().empty());
  EXPECT_EQ(sup.Tick(Clock::now()), std::nullopt);
}

// Not a pass/fail check: 64 ranks under one step vs 64 direct spawns.
TEST_F(StepSupervisorTest, MicroMeasureStep64True) {
  auto& sup = Make();
  std::vector<WorkerLaunch> launches;
  for (uint32_t rank = 0; rank < 64; ++rank) launches.push_back(Launch({"/bin/true"}, rank));
  auto t0 = Clock::now();
  auto started = sup.StartStep(launches, 1s);
  auto t1 = Clock::now();
  for (const auto& s : started) ASSERT_TRUE(s.ok());
  auto exits = WaitExits(64);
  auto t2 = Clock::now();
  ASSERT_EQ(exits.size(), 64u);
  auto us = [](auto d) { return std::chrono::duration_cast<std::chrono::microseconds>(d).count(); };
  std::printf(
      "[ measure  ] 64 x /bin/true under one step: started %lld us, all exits read %lld us\n",
      static_cast<long long>(us(t1 - t0)), static_cast<long long>(us(t2 - t0)));
}

}  // namespace
}  // namespace trainlet::agent
