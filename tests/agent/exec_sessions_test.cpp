// ExecSessions over a real WorkerSupervisor and trainlet-step: a session's output and exit are
// relayed in order; it outlives the agent (the supervisor and sessions are destroyed and made
// again over the same state, as a kill -9 and restart do) and the new agent resends exactly what
// the coordinator had not acknowledged; a session the coordinator no longer lists is stopped;
// and a finished one leaves nothing on disk once the coordinator forgets it. Like the agent, the
// test blocks SIGCHLD, SIGTERM and SIGINT.
#include "agent/exec_sessions.h"

#include <gtest/gtest.h>
#include <pwd.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "agent/process_spawner.h"
#include "common/platform/process_info.h"
#include "tests/common/supervisor_fixture.h"

namespace trainlet::agent {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

using testing::Alive;

class ExecSessionsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { testing::BlockAgentSignals(); }

  void SetUp() override {
    char tmpl[] = "/tmp/trainlet-exec-sessions-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = fs::canonical(tmpl);
    options_ = testing::StepOptionsUnder(dir_);
    fs::create_directories(dir_ / "work");
  }

  void TearDown() override {
    sessions_.reset();
    if (sup_) {
      sup_->KillAllAndWait(5s);
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

  // A new "agent": supervisor (adopting any steps) and sessions (restoring any sessions).
  void MakeAgent() {
    sessions_.reset();
    sup_.reset();  // kills nothing: steps and sessions outlive it
    sent_.clear();
    sup_ = std::make_unique<WorkerSupervisor>(
        posix_.get(), std::vector<std::string>{"PATH=/usr/bin:/bin", "LANG=C"}, options_);
    sup_->AdoptSteps();
    sessions_ = std::make_unique<ExecSessions>(sup_.get(), (dir_ / "exec").string(),
                                               [this](v1::Envelope e) { sent_.push_back(e); });
    sessions_->Restore();
  }

  void StartSession(uint64_t id, const std::string& command) {
    v1::ExecStart start;
    start.set_exec_id(id);
    start.set_job("job-a");
    start.set_attempt(1);
    start.set_command(command);
    start.set_stop_grace_ms(2000);
    sessions_->Start(start, {{"TRAINLET_JOB", "job-a"}}, (dir_ / "work").string());
  }

  // One loop iteration of the agent: poll the sessions' wake-up and the supervisor, then handle.
  void Turn() {
    std::vector<zmq_pollitem_t> items = {{nullptr, sup_->wake_fd(), ZMQ_POLLIN, 0}};
    sessions_->AddPollItems(items);
    zmq_poll(items.data(), static_cast<int>(items.size()), 20);
    sessions_->OnPolled(items);
    for (const WorkerExit& e : sup_->Reap()) EXPECT_TRUE(sessions_->OnWorkerExit(e));
    sup_->Tick(Clock::now());
  }

  template <class Pred>
  bool RunUntil(Pred done, Clock::duration timeout = 10s) {
    const auto deadline = Clock::now() + timeout;
    while (!done()) {
      if (Clock::now() >= deadline) return false;
      Turn();
    }
    return true;
  }

  // What was sent for `id` on `stream`, joined, after checking that offsets are contiguous from
  // `from` (what a coordinator would pass on, given it relayed `from` bytes already).
  std::string Stream(uint64_t id, uint32_t stream, uint64_t from = 0) {
    std::string out;
    uint64_t next = from;
    for (const auto& e : sent_) {
      if (!e.has_exec_output() || e.exec_output().exec_id() != id ||
          e.exec_output().stream() != stream) {
        continue;
      }
      EXPECT_EQ(e.exec_output().offset(), next) << "a gap or a repeat in stream " << stream;
      next = e.exec_output().offset() + e.exec_output().data().size();
      out += e.exec_output().data();
    }
    return out;
  }

  const v1::ExecExited* Exited(uint64_t id) const {
    for (const auto& e : sent_) {
      if (e.has_exec_exited() && e.exec_exited().exec_id() == id) return &e.exec_exited();
    }
    return nullptr;
  }

  // A HeartbeatAck's exec list: `id` with these relayed counts, or nothing.
  google::protobuf::RepeatedPtrField<v1::ExecDelivered> Listed(
      std::vector<std::tuple<uint64_t, uint64_t, uint64_t>> sessions) {
    google::protobuf::RepeatedPtrField<v1::ExecDelivered> out;
    for (auto [id, o, e] : sessions) {
      auto* d = out.Add();
      d->set_exec_id(id);
      d->set_stdout_bytes(o);
      d->set_stderr_bytes(e);
    }
    return out;
  }

  pid_t SessionPid() const {
    for (const auto& w : sup_->Running()) {
      if (w.rank >= kExecRankBase) return w.pid;
    }
    return -1;
  }

  size_t Entries(const fs::path& p) const {
    size_t n = 0;
    std::error_code ec;
    for ([[maybe_unused]] const auto& e : fs::directory_iterator(p, ec)) ++n;
    return n;
  }

  fs::path dir_;
  WorkerSupervisor::Options options_;
  std::unique_ptr<ProcessSpawner> posix_ = MakePosixProcessSpawner();
  std::unique_ptr<WorkerSupervisor> sup_;
  std::unique_ptr<ExecSessions> sessions_;
  std::vector<v1::Envelope> sent_;
};

TEST_F(ExecSessionsTest, OutputThenExitAreRelayedAndNothingIsLeftOnceForgotten) {
  MakeAgent();
  StartSession(7, "echo out-$TRAINLET_JOB; echo err >&2; pwd; exit 3");
  ASSERT_TRUE(RunUntil([&] { return Exited(7) != nullptr; }));
  EXPECT_EQ(Stream(7, 1), "out-job-a\n" + (dir_ / "work").string() + "\n");
  EXPECT_EQ(Stream(7, 2), "err\n");
  EXPECT_EQ(Exited(7)->exit_code(), 3);
  EXPECT_EQ(Exited(7)->signal(), 0);
  // Never the exit before the output.
  EXPECT_TRUE(sent_.back().has_exec_exited());
  EXPECT_EQ(sessions_->size(), 0u);
  EXPECT_EQ(Entries(dir_ / "exec"), 1u);  // kept until the coordinator has the exit
  sessions_->OnDelivered(Listed({{7, 20, 4}}), Clock::now());
  EXPECT_EQ(Entries(dir_ / "exec"), 1u);
  sessions_->OnDelivered(Listed({}), Clock::now());
  EXPECT_EQ(Entries(dir_ / "exec"), 0u);
  EXPECT_TRUE(RunUntil([&] { return Entries(options_.steps_dir) == 0; }))
      << "the session's step directory must go with it";
}

TEST_F(ExecSessionsTest, SessionOutlivesTheAgentAndOnlyUnacknowledgedOutputIsResent) {
  MakeAgent();
  const fs::path go = dir_ / "go";
  StartSession(9, "echo before; echo early-err >&2; while [ ! -e " + go.string() +
                      " ]; do sleep 0.02; done; echo after; exit 5");
  ASSERT_TRUE(
      RunUntil([&] { return Stream(9, 1) == "before\n" && Stream(9, 2) == "early-err\n"; }));
  const pid_t pid = SessionPid();
  ASSERT_GT(pid, 0);
  // The coordinator relayed 3 bytes of stdout and all of stderr; the rest of stdout was in
  // flight when the agent died.
  sessions_->OnDelivered(Listed({{9, 3, 10}}), Clock::now());

  MakeAgent();  // the agent is gone and back; the session's process is not
  EXPECT_TRUE(Alive(pid));
  EXPECT_EQ(SessionPid(), pid);
  EXPECT_EQ(sessions_->size(), 1u);
  EXPECT_EQ(Stream(9, 1, 3), "ore\n");  // from the acknowledged offset on, nothing else
  EXPECT_EQ(Stream(9, 2, 10), "");
  { std::ofstream(go.string()) << "x"; }
  ASSERT_TRUE(RunUntil([&] { return Exited(9) != nullptr; }));
  EXPECT_EQ(Stream(9, 1, 3), "ore\nafter\n");
  EXPECT_EQ(Exited(9)->exit_code(), 5);
}

TEST_F(ExecSessionsTest, ExitWhileNoAgentRunsIsDeliveredAfterTheRestart) {
  MakeAgent();
  const fs::path go = dir_ / "go";
  StartSession(11, "while [ ! -e " + go.string() + " ]; do sleep 0.02; done; echo done; exit 4");
  ASSERT_GT(SessionPid(), 0);
  const pid_t pid = SessionPid();
  sessions_.reset();
  sup_.reset();
  { std::ofstream(go.string()) << "x"; }
  const auto deadline = Clock::now() + 10s;
  while (Alive(pid) && Clock::now() < deadline) std::this_thread::sleep_for(10ms);
  ASSERT_FALSE(Alive(pid));
  MakeAgent();
  ASSERT_TRUE(RunUntil([&] { return Exited(11) != nullptr; }));
  EXPECT_EQ(Stream(11, 1), "done\n");
  EXPECT_EQ(Exited(11)->exit_code(), 4);
}

// The coordinator restarted: the agent registers again, reporting what was acknowledged, and
// the new coordinator resumes from those counts. Output read after the registration is held, and
// sent from the acknowledged counts once it is accepted, so trainlet-exec sees no gap.
TEST_F(ExecSessionsTest, OutputWhileARegistrationIsUnansweredIsSentFromTheAcknowledgedCounts) {
  MakeAgent();
  const fs::path go = dir_ / "go";
  StartSession(15, "echo one; while [ ! -e " + go.string() +
                       " ]; do sleep 0.02; done; echo two; echo late-err >&2; exit 6");
  ASSERT_TRUE(RunUntil([&] { return Stream(15, 1) == "one\n"; }));
  sessions_->OnDelivered(Listed({{15, 2, 0}}), Clock::now());

  sessions_->Hold();
  const size_t sent_before = sent_.size();
  { std::ofstream(go.string()) << "x"; }
  ASSERT_TRUE(RunUntil([&] { return sessions_->size() == 0; }));  // it wrote, and exited
  EXPECT_EQ(sent_.size(), sent_before) << "nothing may go out before the registration's ack";

  sent_.clear();
  sessions_->Resend();
  EXPECT_EQ(Stream(15, 1, 2), "e\ntwo\n");
  EXPECT_EQ(Stream(15, 2), "late-err\n");
  ASSERT_NE(Exited(15), nullptr);
  EXPECT_EQ(Exited(15)->exit_code(), 6);
  EXPECT_TRUE(sent_.back().has_exec_exited());
}

TEST_F(ExecSessionsTest, ASessionTheCoordinatorNoLongerListsIsStopped) {
  MakeAgent();
  StartSession(13, "exec sleep 300");
  const pid_t pid = SessionPid();
  ASSERT_GT(pid, 0);
  sessions_->OnDelivered(Listed({{13, 0, 0}}), Clock::now());
  Turn();
  EXPECT_TRUE(Alive(pid));
  // Its trainlet-exec went away while, say, this agent was down: the cancel never came.
  sessions_->OnDelivered(Listed({}), Clock::now());
  ASSERT_TRUE(RunUntil([&] { return Exited(13) != nullptr; }));
  EXPECT_EQ(Exited(13)->signal(), SIGTERM);
  EXPECT_FALSE(Alive(pid));
}

TEST_F(ExecSessionsTest, CancelStopsOnlyThatSession) {
  MakeAgent();
  StartSession(21, "exec sleep 300");
  StartSession(22, "exec sleep 301");
  ASSERT_EQ(sup_->running(), 2u);
  sessions_->Cancel(21, Clock::now());
  ASSERT_TRUE(RunUntil([&] { return Exited(21) != nullptr; }));
  EXPECT_EQ(Exited(22), nullptr);
  EXPECT_EQ(sup_->running(), 1u);
  EXPECT_EQ(sessions_->size(), 1u);
}

TEST_F(ExecSessionsTest, ARecordWithoutAStepIsReportedAsFailed) {
  // What an agent killed between writing the record and starting the step leaves behind.
  fs::create_directories(dir_ / "exec" / "31");
  ExecSessionRecord r;
  r.exec_id = 31;
  r.job = "job-a";
  r.attempt = 1;
  r.rank = kExecRankBase + 5;
  ASSERT_TRUE(WriteExecRecord((dir_ / "exec" / "31" / "session.json").string(), r).ok());
  MakeAgent();
  ASSERT_NE(Exited(31), nullptr);
  EXPECT_EQ(Exited(31)->exit_code(), 255);
  EXPECT_NE(Exited(31)->error().find("restarted"), std::string::npos);
  EXPECT_EQ(Entries(dir_ / "exec"), 0u);
  // Rank numbers go on after the restored ones.
  StartSession(32, "exit 0");
  ASSERT_TRUE(RunUntil([&] { return Exited(32) != nullptr; }));
}

TEST_F(ExecSessionsTest, AStartThatFailsIsReportedAndLeavesNothing) {
  options_.step_binary = (dir_ / "no-such-step").string();
  MakeAgent();
  StartSession(41, "true");
  ASSERT_NE(Exited(41), nullptr);
  EXPECT_EQ(Exited(41)->exit_code(), 255);
  EXPECT_NE(Exited(41)->error().find("no-such-step"), std::string::npos) << Exited(41)->error();
  EXPECT_EQ(Entries(dir_ / "exec"), 0u);
  EXPECT_EQ(sessions_->size(), 0u);
}

// issue 19: an orted starts ranks of the job, so it runs as the job's securityContext user (not
// the agent's run_as, here root), with the launcher key in that user's 0400 file, not its env.
TEST_F(ExecSessionsTest, ASessionRunsAsTheJobsUserWithItsSecretInAFile) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to switch users";
  const passwd* nobody = getpwnam("nobody");
  if (nobody == nullptr) GTEST_SKIP() << "no user nobody here";
  const uid_t uid = nobody->pw_uid;
  const gid_t gid = nobody->pw_gid;
  fs::permissions(dir_, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
  MakeAgent();
  v1::ExecStart start;
  start.set_exec_id(51);
  start.set_job("job-a");
  start.set_attempt(1);
  start.set_command(
      "echo ids=$(id -u):$(id -g):$(id -G) key=${TRAINLET_EXEC_KEY:-none}; "
      "stat -c mode=%a:%u \"$TRAINLET_EXEC_KEY_FILE\"; cat \"$TRAINLET_EXEC_KEY_FILE\"; echo");
  start.set_run_as_user(uid);
  start.set_run_as_group(gid);
  start.set_fs_group(4242);  // its pod's fsGroup: a supplementary group, as the ranks get it
  (*start.mutable_env())["TRAINLET_EXEC_KEY"] = "launcher-secret";
  // The job's env may not name the dir root gives to the job's user: the node's wins.
  fs::create_directories(dir_ / "decoy");
  (*start.mutable_env())["TRAINLET_WORK_DIR"] = (dir_ / "decoy").string();
  sessions_->Start(start,
                   {{"TRAINLET_JOB", "job-a"}, {"TRAINLET_WORK_DIR", (dir_ / "work").string()}},
                   (dir_ / "work").string());
  // What the step was asked, as the supervisor reads it back for the rank's Started event.
  const auto asked = sup_->RankRunAs("job-a", 1, kExecRankBase);
  ASSERT_TRUE(asked.has_value());
  EXPECT_EQ(asked->job_run_as_user, std::optional<int64_t>(uid));
  EXPECT_EQ(asked->job_run_as_group, std::optional<int64_t>(gid));
  EXPECT_EQ(asked->fs_group, std::optional<int64_t>(4242));
  EXPECT_FALSE(sup_->RankRunAs("job-a", 2, kExecRankBase).has_value());
  ASSERT_TRUE(RunUntil([&] { return Exited(51) != nullptr; })) << Stream(51, 2);
  const std::string ids = std::to_string(uid) + ":" + std::to_string(gid);
  EXPECT_EQ(Stream(51, 1), "ids=" + ids + ":" + std::to_string(gid) + " 4242" +
                               " key=none\nmode=400:" + std::to_string(uid) + "\nlauncher-secret\n")
      << Stream(51, 2);
  EXPECT_EQ(Exited(51)->exit_code(), 0) << Stream(51, 2);
  struct stat decoy {};
  ASSERT_EQ(stat((dir_ / "decoy").c_str(), &decoy), 0);
  EXPECT_EQ(decoy.st_uid, 0u) << "a dir the job's env named was given to the job's user";
}

}  // namespace
}  // namespace trainlet::agent
