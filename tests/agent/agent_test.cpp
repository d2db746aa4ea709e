// Agent through the fake OS (tests/common/fake_env.h) and a real CURVE ROUTER on 127.0.0.1 standing
// in for the coordinator: start-up on a fixture topology, a spawn that fails, a wall clock that
// jumps. The test drives the agent's loop one iteration at a time (Agent::RunOnce); nothing is
// started for real (FakeSpawner), and the fake monotonic clock moves only when the test says.
#include "agent/agent.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <zmq.hpp>
#ifdef __linux__
#include <linux/fs.h>
#endif

#include "common/curve_keys.h"
#include "common/platform/directory_spread.h"
#include "common/platform/env.h"
#include "common/zap_authenticator.h"
#include "common/zmq_sockets.h"
#include "tests/common/fake_env.h"
#include "tests/common/test_dir.h"
#include "tests/common/test_keys.h"

namespace trainlet::agent {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

using ::trainlet::testing::NewKeys;

class AgentTest : public ::testing::Test {
 protected:
  // The agent reads its signals from a SignalWatch: block them before any thread exists.
  static void SetUpTestSuite() { PrepareLoopSignals(); }

  void SetUp() override {
    const CurveKeyPair server = NewKeys();
    const CurveKeyPair agent = NewKeys();
    ASSERT_TRUE(WriteKeyPair(dir_.File("coordinator.key"), server).ok());
    ASSERT_TRUE(WriteKeyPair(dir_.File("agent.key"), agent).ok());
    auto zap = ZapAuthenticator::Create(ctx_);
    ASSERT_TRUE(zap.ok()) << zap.status().ToString();
    zap_ = std::move(zap).value();
    zap_->SetAllowlist("agent", {{agent.public_z85, "node-a"}});
    std::string endpoint;
    auto router = BindCurveRouter(ctx_, "tcp://127.0.0.1:0", server, "agent", &endpoint);
    ASSERT_TRUE(router.ok()) << router.status().ToString();
    router_.emplace(std::move(router).value());

    config_.name = "node-a";
    config_.coordinator = endpoint;
    config_.coordinator_key_file = dir_.File("coordinator.key.pub");
    config_.key_file = dir_.File("agent.key");
    config_.state_dir = dir_.File("state");
    config_.topology_xml = std::string(TRAINLET_SOURCE_DIR) + "/tests/fixtures/cpu-2socket.xml";
    config_.metrics_address = "";
    config_.health.check_gpu_count = false;  // this machine's GPUs are not the fixture's
  }

  void StartAgent() {
    auto agent = Agent::Create(config_, env_);
    ASSERT_TRUE(agent.ok()) << agent.status().ToString();
    agent_ = std::move(agent).value();
  }

  // Runs the agent's loop and the coordinator's side in turn for up to `budget` of real time;
  // returns the first message of kind `body` the coordinator receives.
  std::optional<v1::Envelope> AtCoordinator(v1::Envelope::BodyCase body,
                                            milliseconds budget = milliseconds(5000)) {
    const auto deadline = Clock::now() + budget;
    while (Clock::now() < deadline) {
      EXPECT_TRUE(agent_->RunOnce(milliseconds(5)).ok());
      zmq::pollitem_t items[] = {{zap_->socket().handle(), 0, ZMQ_POLLIN, 0},
                                 {router_->handle(), 0, ZMQ_POLLIN, 0}};
      zmq::poll(items, 2, milliseconds(5));
      if (items[0].revents & ZMQ_POLLIN) zap_->HandleRequest();
      if (items[1].revents & ZMQ_POLLIN) {
        auto msg = ReceiveFromRouter(*router_, drops_);
        if (!msg) continue;
        routing_id_ = msg->routing_id;
        if (msg->envelope.body_case() == body) return msg->envelope;
      }
    }
    return std::nullopt;
  }

  void ToAgent(v1::Envelope env) { ASSERT_TRUE(SendToRouterPeer(*router_, routing_id_, env)); }

  // Start-up and an accepted registration. Returns the registration.
  v1::NodeInfo StartAndRegister() {
    StartAgent();
    if (!agent_) return {};
    auto reg = AtCoordinator(v1::Envelope::kRegister);
    EXPECT_TRUE(reg) << "no registration arrived";
    if (!reg) return {};
    v1::Envelope ack;
    ack.mutable_register_ack()->set_accepted(true);
    ack.mutable_register_ack()->set_partition_grace_ms(10000);
    ToAgent(std::move(ack));
    return reg->register_();
  }

  testing::TempDir dir_;
  testing::FakeEnv env_;
  zmq::context_t ctx_;
  std::unique_ptr<ZapAuthenticator> zap_;
  std::optional<zmq::socket_t> router_;
  std::string routing_id_;
  DropCounters drops_;
  AgentConfig config_;
  std::unique_ptr<Agent> agent_;
};

TEST_F(AgentTest, StartsUpFromAFixtureTopologyAndRegisters) {
  const v1::NodeInfo reg = StartAndRegister();
  EXPECT_EQ(reg.name(), "node-a");
  EXPECT_EQ(reg.hostname(), "fake-host");  // the Env's, not this machine's
  EXPECT_EQ(reg.topology().packages(), 2u);
  EXPECT_EQ(reg.topology().pus(), 128u);
  EXPECT_EQ(reg.slots(), 128u);                       // one per PU when not set
  EXPECT_EQ(reg.boot_id_hash(), 1'700'000'000'000u);  // the fake wall clock at start-up
  EXPECT_FALSE(reg.agent_version().empty());
  EXPECT_EQ(reg.running_size(), 0);

  // The state dir is locked while the agent lives: a second one refuses it, saying why.
  AgentConfig second = config_;
  second.name = "node-b";
  auto other = Agent::Create(second, env_);
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.status().code(), ErrorCode::kExists);
  EXPECT_EQ(other.status().message(), "--state-dir " + config_.state_dir +
                                          ": another trainlet-agent is running with it (" +
                                          config_.state_dir + "/agent.lock is locked)");
}

TEST_F(AgentTest, TheNodeNameDefaultsToTheEnvsHostname) {
  config_.name = "";
  env_.set_hostname("gpu-node-17");
  const v1::NodeInfo reg = StartAndRegister();
  EXPECT_EQ(reg.name(), "gpu-node-17");
}

TEST_F(AgentTest, KeysAndTheSubreaperGoThroughTheEnv) {
  // The key file is read through the Env: its failure is the start-up's, naming the file.
  env_.FailNextRead(PermissionError(config_.key_file + ": Permission denied"));
  auto refused = Agent::Create(config_, env_);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message(),
            "cannot read key file " + config_.key_file + ": Permission denied");
  EXPECT_EQ(env_.subreaper_calls(), 0);

  // A system without a child subreaper is only logged: the agent starts and registers.
  env_.set_subreaper_status(UnavailableError("this platform has no child subreaper"));
  const v1::NodeInfo reg = StartAndRegister();
  EXPECT_EQ(reg.name(), "node-a");
  EXPECT_EQ(env_.subreaper_calls(), 1);
}

TEST_F(AgentTest, AFailingSpawnIsReportedAsStartFailed) {
  StartAndRegister();
  env_.spawner().FailNextSpawn(InternalError("fork: Resource temporarily unavailable"));
  v1::Envelope env;
  auto* plan = env.mutable_launch_plan();
  plan->set_job("train");
  plan->set_attempt(1);
  for (uint32_t rank = 0; rank < 2; ++rank) {
    auto* w = plan->add_workers();
    w->set_rank(rank);
    w->set_local_rank(rank);
    w->add_argv("/bin/true");
  }
  ToAgent(std::move(env));

  for (uint32_t rank = 0; rank < 2; ++rank) {
    auto event = AtCoordinator(v1::Envelope::kWorkerEvent);
    ASSERT_TRUE(event) << "no event for rank " << rank;
    const v1::WorkerEvent& ev = event->worker_event();
    EXPECT_EQ(ev.kind(), v1::WorkerEvent::KIND_START_FAILED);
    EXPECT_EQ(ev.job(), "train");
    EXPECT_EQ(ev.attempt(), 1u);
    EXPECT_EQ(ev.rank(), rank);
    EXPECT_EQ(ev.node(), "node-a");
    EXPECT_EQ(ev.seq(), rank + 1);
    EXPECT_NE(ev.message().find("fork: Resource temporarily unavailable"), std::string::npos)
        << ev.message();
  }
  // One step was asked for, from beside the agent's own binary (the Env's executable path).
  ASSERT_EQ(env_.spawner().requests().size(), 1u);
  EXPECT_EQ(env_.spawner().requests()[0].argv.at(0), "/opt/trainlet/bin/trainlet-step");
}

mode_t ModeOf(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

// Issue 19: the agent's state dir, the parents of the job directories and each job's work dir
// are 0700 whatever the umask, and a state dir given with looser bits is tightened.
TEST_F(AgentTest, StateAndWorkDirsArePrivateUnderUmaskZero) {
  testing::ScopedUmask umask0(0);
  ASSERT_EQ(mkdir(config_.state_dir.c_str(), 0755), 0);
  StartAndRegister();
  ASSERT_NE(agent_, nullptr);
  for (const char* sub : {"", "/logs", "/work", "/steps", "/exec"}) {
    EXPECT_EQ(ModeOf(config_.state_dir + sub), 0700u) << "state dir" << sub;
  }

  env_.spawner().FailNextSpawn(InternalError("no fork today"));
  v1::Envelope env;
  auto* plan = env.mutable_launch_plan();
  plan->set_job("secret-job");
  plan->set_attempt(1);
  auto* w = plan->add_workers();
  w->set_rank(0);
  w->add_argv("/bin/true");
  ToAgent(std::move(env));
  ASSERT_TRUE(AtCoordinator(v1::Envelope::kWorkerEvent)) << "the plan was not handled";
  EXPECT_EQ(ModeOf(config_.state_dir + "/work/secret-job"), 0700u);
}

#ifdef __linux__
// The dirs one subdirectory per job comes and goes under, work/ (each job's work dir, with the
// most of a job's inodes) among them, are marked FS_TOPDIR_FL where the file system has it, so
// ext4 spreads the jobs' dirs over its block groups instead of allocating every job's files
// past the last jobs' freed inodes (common/platform/directory_spread.h).
TEST_F(AgentTest, TheJobDirectoriesAreSpreadOverTheDisk) {
  StartAndRegister();
  ASSERT_NE(agent_, nullptr);
  const auto topdir = [](const std::string& dir) -> std::optional<bool> {
    const int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return std::nullopt;
    int flags = 0;
    const int rc = ioctl(fd, FS_IOC_GETFLAGS, &flags);
    close(fd);
    if (rc != 0) return std::nullopt;
    return (flags & FS_TOPDIR_FL) != 0;
  };
  if (platform::SpreadSubdirectories(config_.state_dir).code() != ErrorCode::kOk) {
    GTEST_SKIP() << "this file system has no FS_TOPDIR_FL";
  }
  for (const char* sub : {"/logs", "/steps", "/exec", "/work"}) {
    EXPECT_EQ(topdir(config_.state_dir + sub), std::optional<bool>(true)) << sub;
  }
}
#endif

TEST_F(AgentTest, AWallClockJumpMovesNoTimer) {
  StartAndRegister();
  // The beat due at start went before the connection was up, and is never queued: the next one
  // is due a second later.
  EXPECT_FALSE(AtCoordinator(v1::Envelope::kHeartbeat, milliseconds(200)));
  env_.Advance(std::chrono::seconds(1));
  auto first = AtCoordinator(v1::Envelope::kHeartbeat);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->heartbeat().node(), "node-a");
  const int64_t wall = first->heartbeat().sent_unix_ms();
  EXPECT_EQ(wall, 1'700'000'001'000);

  // NTP steps the wall clock back an hour: heartbeats follow the monotonic clock, which did not
  // move, so none is due, and nothing is re-sent.
  env_.Jump(-std::chrono::hours(1));
  EXPECT_FALSE(AtCoordinator(v1::Envelope::kHeartbeat, milliseconds(300)));

  // A second passes: the next beat goes, stamped with the stepped wall clock.
  env_.Advance(std::chrono::seconds(1));
  auto second = AtCoordinator(v1::Envelope::kHeartbeat);
  ASSERT_TRUE(second);
  EXPECT_EQ(second->heartbeat().seq(), first->heartbeat().seq() + 1);
  EXPECT_EQ(second->heartbeat().sent_unix_ms(), wall + 1000 - 3600 * 1000);

  // Forward a day: still one beat per monotonic second, and no registration again.
  env_.Jump(std::chrono::hours(24));
  EXPECT_FALSE(AtCoordinator(v1::Envelope::kHeartbeat, milliseconds(300)));
  EXPECT_FALSE(AtCoordinator(v1::Envelope::kRegister, milliseconds(100)));
}

// Issue 15: a rank's progress post, with the token and CA the agent gave it, reaches the
// coordinator as one ProgressReport; another node's token does not. The real OS this time: a
// real trainlet-step runs a real rank, which the test stops at the end.
TEST_F(AgentTest, ARanksProgressPostReachesTheCoordinator) {
  config_.address = "127.0.0.1";
  auto created = Agent::Create(config_, platform::RealEnv());
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  agent_ = std::move(created).value();
  ASSERT_TRUE(AtCoordinator(v1::Envelope::kRegister));
  v1::Envelope ack;
  ack.mutable_register_ack()->set_accepted(true);
  ack.mutable_register_ack()->set_partition_grace_ms(10000);
  ToAgent(std::move(ack));
  v1::Envelope env;
  auto* plan = env.mutable_launch_plan();
  plan->set_job("train");
  plan->set_attempt(3);
  auto* w = plan->add_workers();
  w->set_rank(0);
  w->add_argv("/bin/sleep");
  w->add_argv("30");
  ToAgent(std::move(env));
  auto started = AtCoordinator(v1::Envelope::kWorkerEvent);
  ASSERT_TRUE(started);
  ASSERT_EQ(started->worker_event().kind(), v1::WorkerEvent::KIND_STARTED)
      << started->worker_event().message();

  const std::string progress = config_.state_dir + "/progress";
  std::string port;
  std::getline(std::ifstream(progress + "/port"), port);
  ASSERT_FALSE(port.empty());
  const std::string url = "https://127.0.0.1:" + port +
                          "/apis/trainer.kubeflow.org/v1alpha1/namespaces/default/trainjobs/"
                          "train/status";
  auto post = [&](const std::string& token_file) {
    const std::string cmd = "curl -s --max-time 10 -o /dev/null -w '%{http_code}' --cacert " +
                            progress + "/ca.crt -H \"Authorization: Bearer $(cat " + token_file +
                            ")\" --data-binary "
                            "'{\"trainerStatus\": {\"progressPercentage\": 42}}' '" +
                            url + "'";
    return std::async(std::launch::async, [cmd] {
      std::string out;
      if (FILE* f = popen(cmd.c_str(), "r")) {
        char buf[64];
        for (size_t n; (n = fread(buf, 1, sizeof buf, f)) > 0;) out.append(buf, n);
        pclose(f);
      }
      return out;
    });
  };
  const std::string token_file = progress + "/tokens/train.attempt-3";
  auto code = post(token_file);
  auto report = AtCoordinator(v1::Envelope::kProgressReport);
  EXPECT_EQ(code.get(), "200");
  ASSERT_TRUE(report) << "no ProgressReport reached the coordinator";
  ASSERT_EQ(report->progress_report().updates_size(), 1);
  const v1::JobProgress& u = report->progress_report().updates(0);
  EXPECT_EQ(u.job(), "train");
  EXPECT_EQ(u.attempt(), 3u);
  EXPECT_EQ(u.status().progress_percentage(), 42);
  EXPECT_GT(u.status().last_updated_unix_ms(), 0) << "the agent's wall clock";

  // A token of an attempt that does not run here is refused, and nothing more is reported.
  {
    std::ofstream(dir_.File("old.token"))
        << ProgressTokens(std::string(32, 'x')).Issue("train", 3);  // not this node's secret
  }
  auto refused = post(dir_.File("old.token"));
  EXPECT_FALSE(AtCoordinator(v1::Envelope::kProgressReport, milliseconds(1000)));
  EXPECT_EQ(refused.get(), "401");

  v1::Envelope stop;
  stop.mutable_stop_workers()->set_job("train");
  stop.mutable_stop_workers()->set_attempt(3);
  ToAgent(std::move(stop));
  auto exited = AtCoordinator(v1::Envelope::kWorkerEvent, milliseconds(15000));
  ASSERT_TRUE(exited) << "the rank did not stop";
  EXPECT_EQ(exited->worker_event().kind(), v1::WorkerEvent::KIND_EXITED);
}

// Issue 18: every worker gets the job's workspace (by a private mount namespace as root, else by
// env, and the STARTED event says which); argv[0] "trainlet-initializer" runs the one beside the
// agent, which fills the workspace; a worker that fails has its last log line in its EXITED event.
// The real OS: real steps run real workers.
TEST_F(AgentTest, WorkersGetTheWorkspaceTheInitializerAndTheirLastLogLine) {
  auto created = Agent::Create(config_, platform::RealEnv());
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  agent_ = std::move(created).value();
  ASSERT_TRUE(AtCoordinator(v1::Envelope::kRegister));
  v1::Envelope ack;
  ack.mutable_register_ack()->set_accepted(true);
  ack.mutable_register_ack()->set_partition_grace_ms(10000);
  ToAgent(std::move(ack));
  std::ofstream(dir_.File("train.jsonl")) << "{\"text\": \"hi\"}\n";
  v1::Envelope env;
  auto* plan = env.mutable_launch_plan();
  plan->set_job("ws");
  plan->set_attempt(1);
  auto* w = plan->add_workers();
  w->set_rank(0);
  w->add_argv("/bin/sh");
  w->add_argv("-c");
  w->add_argv("echo \"dataset in $TRAINLET_DATASET_DIR\"; echo '  the reason  '; echo; exit 3");
  auto* init = plan->add_workers();
  init->set_rank(1);
  init->set_local_rank(1);
  init->add_argv("trainlet-initializer");
  init->add_argv("dataset");
  (*init->mutable_env())["STORAGE_URI"] = "file://" + dir_.File("train.jsonl");
  ToAgent(std::move(env));

  const bool root = geteuid() == 0;
  const std::string workspace = config_.state_dir + "/work/ws/workspace";
  std::map<uint32_t, v1::WorkerEvent> started, exited;
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  while (exited.size() < 2 && Clock::now() < deadline) {
    auto event = AtCoordinator(v1::Envelope::kWorkerEvent, milliseconds(1000));
    if (!event) continue;
    const v1::WorkerEvent& ev = event->worker_event();
    ASSERT_NE(ev.kind(), v1::WorkerEvent::KIND_START_FAILED) << ev.message();
    (ev.kind() == v1::WorkerEvent::KIND_STARTED ? started : exited)[ev.rank()] = ev;
  }
  ASSERT_EQ(started.size(), 2u);
  ASSERT_EQ(exited.size(), 2u);
  for (const auto& [rank, ev] : started) {
    EXPECT_EQ(ev.workspace(),
              root ? "/workspace (private mount namespace)" : "TRAINLET_WORKSPACE=" + workspace)
        << rank;
  }
  EXPECT_EQ(exited[0].exit_code(), 3);
  EXPECT_EQ(exited[0].message(), "the reason");
  EXPECT_EQ(exited[1].exit_code(), 0);
  EXPECT_EQ(exited[1].message(), "");
  std::string line;
  std::getline(std::ifstream(config_.state_dir + "/logs/ws/attempt-1/rank-0.log"), line);
  EXPECT_EQ(line, "dataset in " + (root ? std::string("/workspace") : workspace) + "/dataset");
  std::string data;
  std::getline(std::ifstream(workspace + "/dataset/train.jsonl"), data);
  EXPECT_EQ(data, "{\"text\": \"hi\"}") << "the initializer beside the agent filled the workspace";
  EXPECT_EQ(ModeOf(workspace), 0700u);
  EXPECT_EQ(ModeOf(config_.state_dir + "/cache"), 0700u);
}

}  // namespace
}  // namespace trainlet::agent
