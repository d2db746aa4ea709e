// The Coordinator as a whole, on its own: real CURVE sockets on loopback (port 0), a fake agent
// that is just a DEALER, and a FakeEnv for the clocks, so that time moves only when the test says.
// The coordinator's loop is driven with RunOnce on the test's thread (no second thread): each
// RunOnce answers ZAP, reads what the fake agent sent and runs the liveness tick at the fake
// clock's time.
#include "coordinator/coordinator.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "common/curve_keys.h"
#include "common/envelope.h"
#include "common/zmq_sockets.h"
#include "coordinator/apply_limits.h"
#include "tests/common/captured_log.h"
#include "tests/common/fake_env.h"
#include "tests/common/test_dir.h"
#include "tests/common/test_keys.h"
#include "tests/coordinator/full_disk.h"

namespace trainlet::coordinator {
namespace {

using namespace std::chrono_literals;
using testing::FakeEnv;
using testing::TempDir;

using ::trainlet::testing::NewKeys;

class CoordinatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_keys_ = NewKeys();
    agent_keys_ = NewKeys();
    ASSERT_TRUE(WriteKeyPair(dir_.File("coordinator.key"), server_keys_).ok());
    ASSERT_TRUE(
        AppendToAllowlist(dir_.File("agents.allow"), agent_keys_.public_z85, "node-1").ok());
    operator_keys_ = NewKeys();
    ASSERT_TRUE(
        AppendToAllowlist(dir_.File("operators.allow"), operator_keys_.public_z85, "op").ok());
    ASSERT_TRUE(env_.CreateDirectories(dir_.File("state")).ok());

    CoordinatorConfig config;
    config.state_dir = dir_.File("state");
    config.agent_listen = "tcp://127.0.0.1:0";
    config.operator_listen = "tcp://127.0.0.1:0";
    config.exec_listen = "tcp://127.0.0.1:0";
    config.key_file = dir_.File("coordinator.key");
    config.agent_allowlist = dir_.File("agents.allow");
    config.operator_allowlist = dir_.File("operators.allow");
    config.endpoints_file = dir_.File("endpoints.json");
    config.metrics_address = "";
    config.heartbeat_interval = 1000ms;
    config.lost_timeout = 3000ms;
    config.init_store = true;  // a new cluster (issue 19, defect 3)
    config_ = config;
    StartCoordinator();
  }

  // Creates the coordinator from config_ (again: a restart on the same state dir, with new
  // ports) and connects the fake agent to it.
  void StartCoordinator() {
    dealer_.reset();
    coordinator_.reset();
    auto created = Coordinator::Create(config_, env_);
    ASSERT_TRUE(created.ok()) << created.status().ToString();
    coordinator_ = std::move(created).value();

    auto dealer = ConnectCurveDealer(ctx_, coordinator_->agent_endpoint(), server_keys_.public_z85,
                                     agent_keys_);
    ASSERT_TRUE(dealer.ok()) << dealer.status().ToString();
    dealer_.emplace(std::move(dealer).value());
  }

  // Sends `env` from the fake agent (retrying while the connection is being made) and runs the
  // coordinator until the agent gets an answer, for up to 10 s of real time.
  std::optional<v1::Envelope> Exchange(v1::Envelope env) {
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    bool sent = false;
    while (std::chrono::steady_clock::now() < deadline) {
      if (!sent) sent = SendOnDealer(*dealer_, env);
      EXPECT_TRUE(coordinator_->RunOnce(10ms).ok());
      if (auto reply = ReceiveFromDealer(*dealer_, drops_)) return reply;
    }
    return std::nullopt;
  }

  void Register() {
    v1::Envelope env;
    env.mutable_register_()->set_name("node-1");
    env.mutable_register_()->set_address("127.0.0.1");
    env.mutable_register_()->set_slots(2);
    auto ack = Exchange(env);
    ASSERT_TRUE(ack.has_value()) << "no answer to the registration";
    ASSERT_TRUE(ack->has_register_ack());
    ASSERT_TRUE(ack->register_ack().accepted()) << ack->register_ack().reason();
  }

  // node-1's next heartbeat, healthy, stamped with the agent's (fake) wall clock.
  v1::Envelope NextBeat() {
    v1::Envelope env;
    env.mutable_heartbeat()->set_node("node-1");
    env.mutable_heartbeat()->set_seq(++seq_);
    env.mutable_heartbeat()->set_sent_unix_ms(env_.WallUnixMs());
    env.mutable_heartbeat()->set_healthy(true);
    return env;
  }

  // One heartbeat; true when it was acknowledged.
  bool Heartbeat() {
    auto ack = Exchange(NextBeat());
    return ack && ack->has_heartbeat_ack() && ack->heartbeat_ack().heartbeat_seq() == seq_;
  }

  // A few iterations at the current fake time (the tick runs in each).
  void Spin() {
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(coordinator_->RunOnce(0ms).ok());
  }

  NodeState State() {
    const NodeEntry* e = coordinator_->registry().Find("node-1");
    EXPECT_NE(e, nullptr);
    return e != nullptr ? e->state : NodeState::kLost;
  }

  TempDir dir_;
  FakeEnv env_;
  CoordinatorConfig config_;
  CurveKeyPair server_keys_, agent_keys_, operator_keys_;
  zmq::context_t ctx_;
  std::unique_ptr<Coordinator> coordinator_;
  std::optional<zmq::socket_t> dealer_;
  DropCounters drops_;
  uint64_t seq_ = 0;
};

TEST_F(CoordinatorTest, EndpointsFileComesFromTheEnv) {
  auto text = env_.ReadFile(dir_.File("endpoints.json"), 1 << 16);
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  const auto j = nlohmann::json::parse(*text);
  EXPECT_EQ(j.at("agent_endpoint"), coordinator_->agent_endpoint());
  EXPECT_EQ(j.at("pid"), env_.ProcessId()) << "the fake's pid, not the real one";
}

TEST_F(CoordinatorTest, AnEndpointsFileThatCannotBeWrittenFailsCreate) {
  env_.FailNextWrite(FakeEnv::DiskFull(dir_.File("endpoints2.json")));
  CoordinatorConfig config;
  config.state_dir = dir_.File("state2");
  ASSERT_TRUE(env_.CreateDirectories(config.state_dir).ok());
  config.agent_listen = config.operator_listen = config.exec_listen = "tcp://127.0.0.1:0";
  config.key_file = dir_.File("coordinator.key");
  config.agent_allowlist = dir_.File("agents.allow");
  config.operator_allowlist = dir_.File("operators.allow");
  config.endpoints_file = dir_.File("endpoints2.json");
  config.metrics_address = "";
  config.init_store = true;
  auto created = Coordinator::Create(config, env_);
  ASSERT_FALSE(created.ok());
  EXPECT_EQ(created.status().code(), ErrorCode::kIo);
  EXPECT_NE(created.status().message().find("--endpoints-file"), std::string::npos)
      << created.status().message();
}

// Issue 19, defect 3: a coordinator whose store was lost (trainlet.db deleted or truncated to 0
// bytes) started empty and told every agent to stop its ranks. It now refuses a store that holds
// nothing unless told to initialise it; the message says how, and what that means.
TEST_F(CoordinatorTest, AStoreThatHoldsNothingIsRefusedWithoutInit) {
  coordinator_.reset();
  CoordinatorConfig config = config_;
  config.state_dir = dir_.File("lost");
  config.init_store = false;
  ASSERT_TRUE(env_.CreateDirectories(config.state_dir).ok());
  auto refused = Coordinator::Create(config, env_);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("--init-store"), std::string::npos)
      << refused.status().message();
  EXPECT_NE(refused.status().message().find("agents of the old one refuse"), std::string::npos)
      << refused.status().message();
  // The fixture's store was initialised: it starts again without init, with its cluster id.
  CoordinatorConfig existing = config_;
  existing.init_store = false;
  auto again = Coordinator::Create(existing, env_);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
}

// An agent that belongs to another cluster is refused: it must not take this coordinator's word
// on its ranks (issue 19, defect 3). The ack names this coordinator's cluster.
TEST_F(CoordinatorTest, AnAgentOfAnotherClusterIsRefused) {
  v1::Envelope env;
  env.mutable_register_()->set_name("node-1");
  env.mutable_register_()->set_address("127.0.0.1");
  env.mutable_register_()->set_slots(2);
  env.mutable_register_()->set_cluster_id("another-cluster");
  auto ack = Exchange(env);
  ASSERT_TRUE(ack.has_value() && ack->has_register_ack());
  EXPECT_FALSE(ack->register_ack().accepted());
  EXPECT_NE(ack->register_ack().reason().find("another-cluster"), std::string::npos);
  EXPECT_EQ(coordinator_->registry().Find("node-1"), nullptr);
  Register();  // an agent bound to no cluster yet joins, and learns the id
  env.mutable_register_()->clear_cluster_id();
  ack = Exchange(env);
  ASSERT_TRUE(ack.has_value() && ack->has_register_ack());
  EXPECT_EQ(ack->register_ack().cluster_id().size(), 32u);
}

TEST_F(CoordinatorTest, RegistersAFakeAgent) {
  Register();
  EXPECT_EQ(State(), NodeState::kReady);
  EXPECT_TRUE(Heartbeat());
}

// An agent refused in a loop (two hosts with one name, a key bound to another name) costs one
// warning per 10 s, not one per attempt; each refusal is counted in the metrics.
TEST_F(CoordinatorTest, RefusalsAreCountedAndTheirWarningIsRateLimited) {
  const ::trainlet::testing::CapturedLog log;
  auto lines = [&log] { return log.Lines("refused registration of node-2"); };
  v1::Envelope env;
  env.mutable_register_()->set_name("node-2");  // node-1's key: the allowlist gives it node-1
  env.mutable_register_()->set_slots(2);
  for (int i = 0; i < 30; ++i) {
    auto ack = Exchange(env);
    ASSERT_TRUE(ack && ack->has_register_ack());
    ASSERT_FALSE(ack->register_ack().accepted());
  }
  EXPECT_EQ(lines().size(), 1u);
  env_.Advance(10s);
  ASSERT_TRUE(Exchange(env));
  const auto got = lines();
  ASSERT_EQ(got.size(), 2u) << log.str();
  EXPECT_NE(got[1].find("(and 29 more in the last 10.0 s)"), std::string::npos) << got[1];
  EXPECT_NE(coordinator_->ops().metrics().Render().find(
                "trainlet_coordinator_registrations_refused_total 31"),
            std::string::npos);
}

TEST_F(CoordinatorTest, WallClockJumpsDoNotTouchLiveness) {
  Register();
  // The wall clock steps far forward, then far back, with no time passing: nobody went silent.
  env_.Jump(std::chrono::hours(2));
  Spin();
  EXPECT_EQ(State(), NodeState::kReady);
  env_.Jump(-std::chrono::hours(5));
  Spin();
  EXPECT_EQ(State(), NodeState::kReady);

  // A node that keeps beating stays Ready for many lost timeouts, the wall clock jumping
  // between beats both ways.
  for (int i = 0; i < 12; ++i) {
    env_.Advance(800ms);
    env_.Jump(i % 2 == 0 ? std::chrono::minutes(30) : -std::chrono::minutes(45));
    ASSERT_TRUE(Heartbeat()) << "beat " << i;
    Spin();
    ASSERT_EQ(State(), NodeState::kReady) << "after beat " << i;
  }
}

TEST_F(CoordinatorTest, SilenceOnTheMonotonicClockMarksTheNodeLost) {
  Register();
  ASSERT_TRUE(Heartbeat());
  env_.Advance(1000ms);
  Spin();
  EXPECT_EQ(State(), NodeState::kReady) << "within one interval and a half";
  env_.Advance(1000ms);  // 2 s silent: a beat missed
  Spin();
  EXPECT_EQ(State(), NodeState::kSuspect);
  env_.Advance(900ms);  // 2.9 s: not yet past lost_timeout
  Spin();
  EXPECT_EQ(State(), NodeState::kSuspect);
  env_.Advance(200ms);  // 3.1 s
  Spin();
  EXPECT_EQ(State(), NodeState::kLost);
}

TEST_F(CoordinatorTest, ABackwardWallJumpDoesNotRescueASilentNode) {
  Register();
  env_.Advance(3100ms);
  env_.Jump(-3100ms);  // the wall clock reads as if no time had passed
  Spin();
  EXPECT_EQ(State(), NodeState::kLost);
}

// A ClusterTrainingRuntime (plain) and a TrainJob of one rank, in one file.
std::string OneRankJob(const std::string& annotations) {
  return "apiVersion: trainer.kubeflow.org/v1alpha1\n"
         "kind: ClusterTrainingRuntime\n"
         "metadata: {name: plain}\n"
         "spec:\n"
         "  mlPolicy: {numNodes: 1}\n"
         "  template:\n"
         "    spec:\n"
         "      replicatedJobs:\n"
         "        - name: node\n"
         "          template:\n"
         "            spec:\n"
         "              template:\n"
         "                spec:\n"
         "                  containers: [{name: node, command: [/bin/true]}]\n"
         "---\n"
         "apiVersion: trainer.kubeflow.org/v1alpha1\n"
         "kind: TrainJob\n"
         "metadata:\n"
         "  name: train\n" +
         annotations +
         "spec:\n"
         "  runtimeRef: {name: plain}\n"
         "  trainer: {numNodes: 1, command: [sleep, '600']}\n";
}

// Progress end to end through the coordinator: a registered fake agent runs the job's one rank
// and forwards a ProgressReport; the operator API shows it, the metrics export it, and a report
// of another attempt is dropped and counted.
class CoordinatorProgressTest : public CoordinatorTest {
 protected:
  void SetUp() override {
    CoordinatorTest::SetUp();
    auto op = ConnectCurveDealer(ctx_, coordinator_->operator_endpoint(), server_keys_.public_z85,
                                 operator_keys_);
    ASSERT_TRUE(op.ok()) << op.status().ToString();
    operator_.emplace(std::move(op).value());
  }

  // Sends an operator request and runs the coordinator until its answer comes.
  v1::OperatorResponse Ask(v1::OperatorRequest req) {
    v1::Envelope env;
    req.set_request_id(++request_id_);
    *env.mutable_operator_request() = std::move(req);
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    bool sent = false;
    while (std::chrono::steady_clock::now() < deadline) {
      if (!sent) sent = SendOnDealer(*operator_, env);
      EXPECT_TRUE(coordinator_->RunOnce(10ms).ok());
      if (auto reply = ReceiveFromDealer(*operator_, drops_)) return reply->operator_response();
    }
    ADD_FAILURE() << "no answer from the operator endpoint";
    return {};
  }
  v1::JobStatus GetJob() {
    v1::OperatorRequest req;
    req.mutable_get_jobs()->set_name("train");
    const v1::OperatorResponse r = Ask(req);
    EXPECT_EQ(r.error(), "");
    return r.jobs().jobs_size() == 1 ? r.jobs().jobs(0) : v1::JobStatus{};
  }
  // Sends what needs no answer from the fake agent, and runs the coordinator a little.
  void Tell(v1::Envelope env) {
    ASSERT_TRUE(SendOnDealer(*dealer_, env));
    for (int i = 0; i < 20; ++i) ASSERT_TRUE(coordinator_->RunOnce(5ms).ok());
  }
  // Time passes with the agent beating every 500 ms, so the node stays Ready.
  void Pass(std::chrono::milliseconds total) {
    for (auto t = 0ms; t < total; t += 500ms) {
      env_.Advance(std::min<std::chrono::milliseconds>(500ms, total - t));
      while (ReceiveFromDealer(*dealer_, drops_)) {
      }  // launch plans and the like: the fake agent ignores them
      ASSERT_TRUE(Heartbeat());
      Spin();
    }
  }
  void TellProgress(uint32_t attempt, int percent) {
    v1::Envelope env;
    auto* u = env.mutable_progress_report()->add_updates();
    u->set_job("train");
    u->set_attempt(attempt);
    u->mutable_status()->set_progress_percentage(percent);
    u->mutable_status()->set_estimated_remaining_seconds(190);
    auto* m = u->mutable_status()->add_metrics();
    m->set_name("loss");
    m->set_value("0.25");
    Tell(env);
  }
  // Applies the job and reports its rank started on node-1: Running.
  void StartJob(const std::string& annotations) {
    Register();
    v1::OperatorRequest apply;
    apply.mutable_apply()->set_yaml(OneRankJob(annotations));
    ASSERT_EQ(Ask(apply).error(), "");
    Spin();
    ASSERT_EQ(GetJob().attempt(), 1u) << "the job was not placed";
    v1::Envelope started;
    auto* ev = started.mutable_worker_event();
    ev->set_job("train");
    ev->set_attempt(1);
    ev->set_rank(0);
    ev->set_kind(v1::WorkerEvent::KIND_STARTED);
    ev->set_pid(4242);
    Tell(started);
    ASSERT_EQ(GetJob().job_phase(), v1::JOB_PHASE_RUNNING);
  }

  std::optional<zmq::socket_t> operator_;
  uint64_t request_id_ = 0;
};

TEST_F(CoordinatorProgressTest, AReportFromTheAgentReachesTheOperatorApiAndTheMetrics) {
  StartJob("");
  const int64_t sent_at = env_.WallUnixMs();
  TellProgress(1, 42);
  const v1::JobStatus job = GetJob();
  ASSERT_TRUE(job.has_trainer_status());
  EXPECT_EQ(job.trainer_status().progress_percentage(), 42);
  EXPECT_EQ(job.trainer_status().estimated_remaining_seconds(), 190);
  EXPECT_EQ(job.trainer_status().metrics(0).value(), "0.25");
  EXPECT_EQ(job.trainer_status().attempt(), 1u);
  EXPECT_EQ(job.trainer_status().received_unix_ms(), sent_at);  // the coordinator's (fake) clock

  TellProgress(2, 99);  // an attempt that does not exist: dropped
  EXPECT_EQ(GetJob().trainer_status().progress_percentage(), 42);
  const std::string metrics = coordinator_->ops().metrics().Render();
  EXPECT_NE(metrics.find("trainlet_job_progress_percentage{job=\"train\"} 42"), std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("trainlet_job_estimated_remaining_seconds{job=\"train\"} 190"),
            std::string::npos);
  EXPECT_NE(metrics.find("trainlet_coordinator_progress_updates_total{result=\"taken\"} 1"),
            std::string::npos);
  EXPECT_NE(metrics.find("trainlet_coordinator_progress_updates_total{result=\"stale_attempt\"} 1"),
            std::string::npos);
}

TEST_F(CoordinatorProgressTest, TheLoopWakesForTheStallDeadline) {
  StartJob("  annotations: {trainlet.io/progress-timeout: 3s}\n");
  TellProgress(1, 10);
  Pass(2900ms);
  EXPECT_EQ(GetJob().conditions_size(), 0);
  env_.Advance(200ms);
  Spin();
  const v1::JobStatus job = GetJob();
  ASSERT_GE(job.conditions_size(), 1);
  EXPECT_EQ(job.conditions(0).type(), "Stalled");
  EXPECT_EQ(job.conditions(0).status(), "True");
  EXPECT_EQ(job.job_phase(), v1::JOB_PHASE_RUNNING);  // no on-stall: only the condition
}

// Issue 19, defect 4: a launch plan lost (the coordinator killed after storing the attempt and
// before the agent got the plan; the plan sent while the node was away) left the job Starting
// until the start timeout failed it, counted against maxRestarts 0. The fake agent reports the
// attempts it holds, as trainlet-agent does, and drops the first plan it is sent.
class CoordinatorLostPlanTest : public CoordinatorProgressTest {
 protected:
  // The coordinator is killed and started again on the same state dir (new ports): the fake
  // agent and the operator reconnect.
  void Restart() {
    operator_.reset();
    StartCoordinator();
    auto op = ConnectCurveDealer(ctx_, coordinator_->operator_endpoint(), server_keys_.public_z85,
                                 operator_keys_);
    ASSERT_TRUE(op.ok()) << op.status().ToString();
    operator_.emplace(std::move(op).value());
  }
  // Registers reporting `held` (job, attempt) with their plans, as trainlet-agent does.
  void RegisterHolding(const std::vector<std::pair<std::string, uint32_t>>& held,
                       uint64_t events_acked_through = 0) {
    v1::Envelope env;
    auto* info = env.mutable_register_();
    info->set_events_acked_through(events_acked_through);
    info->set_name("node-1");
    info->set_address("127.0.0.1");
    info->set_slots(2);
    info->set_reports_attempts(true);
    for (const auto& [job, attempt] : held) {
      auto* a = info->add_attempts();
      a->set_job(job);
      a->set_attempt(attempt);
      a->set_plan_received(true);
    }
    auto ack = Exchange(env);
    ASSERT_TRUE(ack.has_value() && ack->has_register_ack()) << "no answer to the registration";
    ASSERT_TRUE(ack->register_ack().accepted()) << ack->register_ack().reason();
  }
  // Runs the coordinator a little, keeping the launch plans the fake agent is sent.
  std::vector<v1::LaunchPlan> Plans() {
    std::vector<v1::LaunchPlan> plans;
    for (int i = 0; i < 20; ++i) {
      EXPECT_TRUE(coordinator_->RunOnce(5ms).ok());
      while (auto msg = ReceiveFromDealer(*dealer_, drops_)) {
        if (msg->has_launch_plan()) plans.push_back(msg->launch_plan());
      }
    }
    return plans;
  }
  // Time passes with the agent beating every 500 ms, reporting no attempt: the plans it is sent
  // meanwhile.
  std::vector<v1::LaunchPlan> PassHoldingNothing(std::chrono::milliseconds total) {
    std::vector<v1::LaunchPlan> plans;
    for (auto t = 0ms; t < total; t += 500ms) {
      env_.Advance(500ms);
      v1::Envelope env = NextBeat();
      env.mutable_heartbeat()->set_reports_attempts(true);
      EXPECT_TRUE(SendOnDealer(*dealer_, env));
      for (auto& p : Plans()) plans.push_back(std::move(p));
    }
    return plans;
  }
  // seq: the agent's number for the event (0: unnumbered).
  void TellRank(v1::WorkerEvent::Kind kind, uint32_t attempt, uint64_t seq = 0) {
    v1::Envelope env;
    auto* ev = env.mutable_worker_event();
    ev->set_job("train");
    ev->set_attempt(attempt);
    ev->set_rank(0);
    ev->set_kind(kind);
    ev->set_pid(4242);
    ev->set_seq(seq);
    if (kind == v1::WorkerEvent::KIND_EXITED) ev->set_exit_code(0);
    Tell(env);
  }
  // One heartbeat: the worker events it acknowledges (through this number).
  uint64_t AckedThrough() {
    v1::Envelope env = NextBeat();
    env.mutable_heartbeat()->set_reports_attempts(true);
    env.mutable_heartbeat()->add_attempts()->set_job("train");
    env.mutable_heartbeat()->mutable_attempts(0)->set_attempt(1);
    env.mutable_heartbeat()->mutable_attempts(0)->set_plan_received(true);
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    bool sent = false;
    while (std::chrono::steady_clock::now() < deadline) {
      if (!sent) sent = SendOnDealer(*dealer_, env);
      EXPECT_TRUE(coordinator_->RunOnce(10ms).ok());
      while (auto reply = ReceiveFromDealer(*dealer_, drops_)) {
        if (reply->has_heartbeat_ack() && reply->heartbeat_ack().heartbeat_seq() == seq_) {
          return reply->heartbeat_ack().acked_event_seq();
        }
      }
    }
    ADD_FAILURE() << "no heartbeat ack";
    return 0;
  }
  void ApplyJob() {
    v1::OperatorRequest apply;
    apply.mutable_apply()->set_yaml(OneRankJob(""));
    ASSERT_EQ(Ask(apply).error(), "");
  }
  // The job placed on node-1 and its rank started (worker event 1), stored and acknowledged.
  void RunningAndStored() {
    RegisterHolding({});
    ApplyJob();
    ASSERT_EQ(Plans().size(), 1u);
    TellRank(v1::WorkerEvent::KIND_STARTED, 1, 1);
    ASSERT_EQ(AckedThrough(), 1u);
  }
};

TEST_F(CoordinatorLostPlanTest, APlanLostToACoordinatorRestartIsSentAgainAndAttemptOneSucceeds) {
  RegisterHolding({});
  ApplyJob();
  ASSERT_EQ(Plans().size(), 1u) << "the job was not placed";
  ASSERT_EQ(GetJob().attempt(), 1u);
  // The attempt is stored; the plan never reaches the agent (dropped above), and the coordinator
  // dies: the new one knows the attempt from the store only.
  Restart();
  if (HasFatalFailure()) return;
  RegisterHolding({});
  const std::vector<v1::LaunchPlan> plans = Plans();
  ASSERT_EQ(plans.size(), 1u) << "the lost plan was not sent again";
  EXPECT_EQ(plans[0].job(), "train");
  EXPECT_EQ(plans[0].attempt(), 1u);
  ASSERT_EQ(plans[0].workers_size(), 1);
  EXPECT_EQ(plans[0].workers(0).argv(0), "sleep");
  TellRank(v1::WorkerEvent::KIND_STARTED, 1);
  TellRank(v1::WorkerEvent::KIND_EXITED, 1);
  const v1::JobStatus job = GetJob();
  EXPECT_EQ(job.job_phase(), v1::JOB_PHASE_SUCCEEDED);
  EXPECT_EQ(job.attempt(), 1u);
  EXPECT_EQ(job.attempts_size(), 1);
}

TEST_F(CoordinatorLostPlanTest, AnAgentThatHoldsThePlanIsNotSentItAgain) {
  RegisterHolding({});
  ApplyJob();
  ASSERT_EQ(Plans().size(), 1u);
  Restart();
  if (HasFatalFailure()) return;
  RegisterHolding({{"train", 1}});
  EXPECT_TRUE(Plans().empty());
  EXPECT_TRUE(PassHoldingNothing(0ms).empty());
}

TEST_F(CoordinatorLostPlanTest, APlanNeverAcknowledgedIsSentAgainWhileTheNodeStaysConnected) {
  RegisterHolding({});
  ApplyJob();
  const std::vector<v1::LaunchPlan> first = Plans();
  ASSERT_EQ(first.size(), 1u);
  // Beats that do not hold the attempt: once one comes well after the send, the plan goes again,
  // the same plan, and no more often than every few seconds.
  const std::vector<v1::LaunchPlan> again = PassHoldingNothing(8000ms);
  ASSERT_GE(again.size(), 1u);
  EXPECT_LE(again.size(), 2u);
  EXPECT_EQ(again[0].job(), "train");
  EXPECT_EQ(again[0].attempt(), first[0].attempt());
  ASSERT_EQ(again[0].workers_size(), first[0].workers_size());
  const auto env = [](const v1::WorkerSpec& w) {
    return std::map<std::string, std::string>(w.env().begin(), w.env().end());
  };
  EXPECT_EQ(env(again[0].workers(0)), env(first[0].workers(0)));  // the same plan
}

TEST_F(CoordinatorLostPlanTest, AStartTimeoutOfAPlanThatNeverArrivedIsNotCounted) {
  // A 5 s start timeout (60 s by default): each 500 ms of the fake clock below also runs the
  // coordinator for up to 100 ms of real time, so 60 s took 12 s or more.
  config_.start_timeout = 5000ms;
  Restart();
  RegisterHolding({});
  ApplyJob();
  ASSERT_EQ(Plans().size(), 1u);
  // The agent never holds the plan, through the whole start timeout: maxRestarts is 0, yet the
  // job is not failed, and its attempt says it was not counted.
  const std::vector<v1::LaunchPlan> plans = PassHoldingNothing(7000ms);
  v1::JobStatus job = GetJob();
  EXPECT_NE(job.job_phase(), v1::JOB_PHASE_FAILED);
  ASSERT_GE(job.attempts_size(), 1);
  EXPECT_THAT(job.attempts(0).cause(), ::testing::HasSubstr("StartTimeout"));
  EXPECT_THAT(job.attempts(0).cause(), ::testing::HasSubstr("never reached"));
  EXPECT_TRUE(job.attempts(0).infrastructure());
  EXPECT_EQ(job.infrastructure_retries(), 1u);
  // The next attempt is placed after the backoff, and runs.
  ASSERT_FALSE(plans.empty());
  EXPECT_EQ(plans.back().attempt(), 2u);
  TellRank(v1::WorkerEvent::KIND_STARTED, 2);
  job = GetJob();
  EXPECT_EQ(job.job_phase(), v1::JOB_PHASE_RUNNING);
  EXPECT_EQ(job.infrastructure_retries(), 0u);
}

// An agent forgets a worker event once a heartbeat acknowledges it, so the coordinator
// acknowledges an event only once what it changed is stored. While the store refuses writes (a
// full disk), the rank's exit is applied in memory but not acknowledged; once the disk has room
// it is stored, then acknowledged.
TEST_F(CoordinatorLostPlanTest, AnEventIsAcknowledgedOnlyOnceItsEffectIsStored) {
  RunningAndStored();
  if (HasFatalFailure()) return;
  {
    FullDisk full(config_.state_dir);
    TellRank(v1::WorkerEvent::KIND_EXITED, 1, 2);
    EXPECT_EQ(AckedThrough(), 1u);
    Spin();  // the loop flushes again, and fails again
    EXPECT_EQ(AckedThrough(), 1u);
  }
  Spin();
  EXPECT_EQ(AckedThrough(), 2u);
  EXPECT_EQ(GetJob().job_phase(), v1::JOB_PHASE_SUCCEEDED);
}

// The coordinator dies (no flush) after applying a rank's exit it could not store: the agent
// still holds the event, unacknowledged, and sends it to the next coordinator, which counts it.
TEST_F(CoordinatorLostPlanTest, AnExitNotYetStoredIsNotLostWhenTheCoordinatorDies) {
  RunningAndStored();
  if (HasFatalFailure()) return;
  uint64_t acked = 0;
  {
    FullDisk full(config_.state_dir);
    TellRank(v1::WorkerEvent::KIND_EXITED, 1, 2);
    acked = AckedThrough();
    EXPECT_EQ(GetJob().job_phase(), v1::JOB_PHASE_SUCCEEDED);  // in memory only
    coordinator_.reset();  // dies before any write succeeds: nothing flushed on the way out
  }
  EXPECT_EQ(acked, 1u);
  Restart();
  if (HasFatalFailure()) return;
  EXPECT_EQ(GetJob().job_phase(), v1::JOB_PHASE_RUNNING);  // what the store held
  RegisterHolding({{"train", 1}}, acked);
  TellRank(v1::WorkerEvent::KIND_EXITED, 1, acked + 1);  // the agent's resend
  const v1::JobStatus job = GetJob();
  EXPECT_EQ(job.job_phase(), v1::JOB_PHASE_SUCCEEDED);
  ASSERT_EQ(job.ranks_size(), 1);
  EXPECT_EQ(job.ranks(0).exit_code(), 0);
}

// After a restart, a node that held ranks and does not register again within the lost timeout
// is as good as Lost: its ranks' attempt fails (an infrastructure failure, naming the node), as
// if it had stopped heartbeating. Before the timeout, nothing is decided.
TEST_F(CoordinatorLostPlanTest, ANodeThatHeldRanksAndDoesNotComeBackAfterARestartIsLost) {
  RunningAndStored();
  if (HasFatalFailure()) return;
  Restart();
  if (HasFatalFailure()) return;
  Spin();                // the new coordinator's first ticks: the lost timeout counts from here
  env_.Advance(2000ms);  // node-1 never registers again
  Spin();
  v1::JobStatus job = GetJob();
  ASSERT_EQ(job.ranks_size(), 1);
  EXPECT_EQ(job.ranks(0).rank_state(), v1::RANK_STATE_RUNNING);
  ASSERT_EQ(job.attempts_size(), 1);
  EXPECT_EQ(job.attempts(0).cause(), "");  // still running
  env_.Advance(1500ms);                    // past the 3 s lost timeout
  Spin();
  job = GetJob();
  ASSERT_GE(job.attempts_size(), 1);
  EXPECT_THAT(job.attempts(0).cause(), ::testing::HasSubstr("node node-1 lost"));
  EXPECT_TRUE(job.attempts(0).infrastructure());
}

}  // namespace
}  // namespace trainlet::coordinator
