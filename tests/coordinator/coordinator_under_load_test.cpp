// The Coordinator under a large apply (issue 19, defect 1): the loop keeps reading heartbeats,
// so no node goes Suspect or Lost and a running job keeps running; and every node going silent
// at once fails no job. Split from coordinator_test.cpp: these run on the real clock with two
// fake agents on a thread of their own, where coordinator_test drives one loop on a fake clock.
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
#include "coordinator/coordinator.h"
#include "tests/common/captured_log.h"
#include "tests/common/fake_env.h"
#include "tests/common/test_dir.h"
#include "tests/common/test_keys.h"

namespace trainlet::coordinator {
namespace {

using namespace std::chrono_literals;
using testing::FakeEnv;
using testing::TempDir;

using ::trainlet::testing::NewKeys;

// Issue 19, defect 1: one large apply held the loop for seconds, the liveness tick ran before the
// heartbeats queued meanwhile were read, and every node was declared Lost, failing a running job.
// Here on the real clock, with liveness scaled down (100 ms beats, Lost after 300 ms) so that a
// few hundred milliseconds of loop held by the apply are enough to show it: two fake agents beat
// every 10 ms from a thread of their own and start the ranks they are sent, a 2-node job runs,
// and a file of kMaxApplyDocuments TrainJobs is applied. No node may go Suspect or Lost, and the
// job must keep running.
class CoordinatorUnderLoadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_keys_ = NewKeys();
    operator_keys_ = NewKeys();
    ASSERT_TRUE(WriteKeyPair(dir_.File("coordinator.key"), server_keys_).ok());
    for (int i = 0; i < 2; ++i) {
      agent_keys_[i] = NewKeys();
      ASSERT_TRUE(AppendToAllowlist(dir_.File("agents.allow"), agent_keys_[i].public_z85,
                                    "node-" + std::to_string(i + 1))
                      .ok());
    }
    ASSERT_TRUE(
        AppendToAllowlist(dir_.File("operators.allow"), operator_keys_.public_z85, "op").ok());
    ASSERT_TRUE(platform::RealEnv().CreateDirectories(dir_.File("state")).ok());
    CoordinatorConfig config;
    config.state_dir = dir_.File("state");
    config.agent_listen = "tcp://127.0.0.1:0";
    config.operator_listen = "tcp://127.0.0.1:0";
    config.exec_listen = "tcp://127.0.0.1:0";
    config.key_file = dir_.File("coordinator.key");
    config.agent_allowlist = dir_.File("agents.allow");
    config.operator_allowlist = dir_.File("operators.allow");
    config.runtimes_dir = std::string(TRAINLET_SOURCE_DIR) + "/deploy/runtimes";
    config.metrics_address = "";
    config.heartbeat_interval = 100ms;
    config.lost_timeout = 300ms;
    config.init_store = true;
    auto created = Coordinator::Create(config);
    ASSERT_TRUE(created.ok()) << created.status().ToString();
    coordinator_ = std::move(created).value();
    auto op = ConnectCurveDealer(ctx_, coordinator_->operator_endpoint(), server_keys_.public_z85,
                                 operator_keys_);
    ASSERT_TRUE(op.ok()) << op.status().ToString();
    operator_.emplace(std::move(op).value());
    agents_ = std::thread([this] { RunAgents(); });
  }

  void TearDown() override {
    stop_ = true;
    if (agents_.joinable()) agents_.join();
  }

  // The two fake agents, on their own thread: register, beat every 10 ms, and answer each launch
  // plan with a Started event per rank.
  void RunAgents() {
    zmq::context_t ctx;
    std::vector<zmq::socket_t> dealers;
    for (int i = 0; i < 2; ++i) {
      auto d = ConnectCurveDealer(ctx, coordinator_->agent_endpoint(), server_keys_.public_z85,
                                  agent_keys_[i]);
      if (!d.ok()) return;
      dealers.push_back(std::move(d).value());
    }
    DropCounters drops;
    uint64_t beat = 0, event_seq[2] = {0, 0};
    bool registered[2] = {false, false};
    auto next_beat = std::chrono::steady_clock::now();
    while (!stop_) {
      const bool beat_now = std::chrono::steady_clock::now() >= next_beat;
      if (beat_now) next_beat = std::chrono::steady_clock::now() + 10ms;
      for (int i = 0; i < 2; ++i) {
        const std::string name = "node-" + std::to_string(i + 1);
        v1::Envelope out;
        if (!registered[i]) {
          out.mutable_register_()->set_name(name);
          out.mutable_register_()->set_address("127.0.0.1");
          out.mutable_register_()->set_slots(2);
        } else {
          out.mutable_heartbeat()->set_node(name);
          out.mutable_heartbeat()->set_seq(++beat);
          out.mutable_heartbeat()->set_healthy(true);
        }
        if (beat_now && !(registered[i] && silent_)) SendOnDealer(dealers[i], out);
        while (auto in = ReceiveFromDealer(dealers[i], drops)) {
          if (in->has_register_ack() && in->register_ack().accepted()) registered[i] = true;
          if (!in->has_launch_plan()) continue;
          for (const auto& w : in->launch_plan().workers()) {
            v1::Envelope ev;
            auto* e = ev.mutable_worker_event();
            e->set_job(in->launch_plan().job());
            e->set_attempt(in->launch_plan().attempt());
            e->set_rank(w.rank());
            e->set_kind(v1::WorkerEvent::KIND_STARTED);
            e->set_pid(1000 + static_cast<int>(w.rank()));
            e->set_node(name);
            e->set_seq(++event_seq[i]);
            SendOnDealer(dealers[i], ev);
          }
        }
      }
      std::this_thread::sleep_for(2ms);
    }
  }

  // Runs the coordinator until the operator's answer to `req` comes, for up to 60 s, noting every
  // node state seen after each iteration.
  std::optional<v1::OperatorResponse> Call(v1::OperatorRequest req) {
    req.set_request_id(++request_id_);
    v1::Envelope env;
    *env.mutable_operator_request() = std::move(req);
    bool sent = false;
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    while (std::chrono::steady_clock::now() < deadline) {
      if (!sent) sent = SendOnDealer(*operator_, env);
      EXPECT_TRUE(coordinator_->RunOnce(5ms).ok());
      NoteStates();
      if (auto reply = ReceiveFromDealer(*operator_, drops_)) {
        if (reply->has_operator_response() &&
            reply->operator_response().request_id() == request_id_) {
          return reply->operator_response();
        }
      }
    }
    return std::nullopt;
  }

  void Spin(std::chrono::milliseconds how_long) {
    const auto until = std::chrono::steady_clock::now() + how_long;
    while (std::chrono::steady_clock::now() < until) {
      ASSERT_TRUE(coordinator_->RunOnce(5ms).ok());
      NoteStates();
    }
  }

  void NoteStates() {
    for (const auto& [name, e] : coordinator_->registry().nodes()) {
      if (e.state != NodeState::kReady) not_ready_.insert(name + " " + NodeStateName(e.state));
    }
  }

  void StartRunner();

  v1::JobPhase PhaseOf(const std::string& job) {
    v1::OperatorRequest req;
    req.mutable_get_jobs()->set_name(job);
    auto r = Call(req);
    if (!r || r->jobs().jobs_size() != 1) return v1::JOB_PHASE_UNSPECIFIED;
    return r->jobs().jobs(0).job_phase();
  }

  static std::string Doc(const std::string& name, int nodes, bool suspend) {
    return "apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata:\n  name: " + name +
           "\nspec:\n" + (suspend ? "  suspend: true\n" : "") +
           "  runtimeRef:\n    name: plain\n  trainer:\n    numNodes: " + std::to_string(nodes) +
           "\n    command: [\"/bin/sh\", \"-c\", \"sleep 1000\"]\n";
  }

  TempDir dir_;
  CurveKeyPair server_keys_, operator_keys_, agent_keys_[2];
  zmq::context_t ctx_;
  std::unique_ptr<Coordinator> coordinator_;
  std::optional<zmq::socket_t> operator_;
  std::thread agents_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> silent_{false};  // registered agents stop beating, as if the network went
  DropCounters drops_;
  uint64_t request_id_ = 0;
  std::set<std::string> not_ready_;  // "node-1 Suspect": states seen since the last clear
};

// Both agents registered and beating, and "runner" (2 nodes) Running.
void CoordinatorUnderLoadTest::StartRunner() {
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (coordinator_->registry().nodes().size() < 2 &&
         std::chrono::steady_clock::now() < deadline) {
    ASSERT_TRUE(coordinator_->RunOnce(5ms).ok());
  }
  ASSERT_EQ(coordinator_->registry().nodes().size(), 2u);
  v1::OperatorRequest apply;
  apply.mutable_apply()->set_yaml(Doc("runner", 2, false));
  auto r = Call(apply);
  ASSERT_TRUE(r && r->error().empty()) << (r ? r->error() : "no answer");
  for (int i = 0; i < 200 && PhaseOf("runner") != v1::JOB_PHASE_RUNNING; ++i) Spin(10ms);
  ASSERT_EQ(PhaseOf("runner"), v1::JOB_PHASE_RUNNING);
  Spin(300ms);
  ASSERT_TRUE(not_ready_.empty()) << "before the test: " << *not_ready_.begin();
}

TEST_F(CoordinatorUnderLoadTest, ALargeApplyLeavesEveryNodeReadyAndTheRunningJobRunning) {
  StartRunner();
  if (HasFatalFailure()) return;
  v1::OperatorRequest apply;
  std::string big;
  for (size_t i = 0; i < kMaxApplyDocuments; ++i) {
    big += (i == 0 ? "" : "---\n") + Doc("bulk-" + std::to_string(i), 1, true);
  }
  apply.mutable_apply()->set_yaml(big);
  apply.mutable_apply()->set_source_name("bulk.yaml");
  const auto start = std::chrono::steady_clock::now();
  auto r = Call(apply);
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_TRUE(r.has_value()) << "no answer to the large apply";
  ASSERT_TRUE(r->error().empty()) << r->error();
  EXPECT_EQ(r->apply().created_size(), static_cast<int>(kMaxApplyDocuments));
  Spin(500ms);
  EXPECT_TRUE(not_ready_.empty())
      << "during an apply of " << big.size() << " bytes ("
      << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
      << " ms): " << *not_ready_.begin();
  EXPECT_EQ(PhaseOf("runner"), v1::JOB_PHASE_RUNNING);
}

// Every node silent at once is the coordinator's trouble (its network, its loop), not the nodes':
// as Kubernetes in a full disruption, no node is declared Lost and the running job is not failed.
// Once the nodes are heard again they are Ready and the job still runs.
TEST_F(CoordinatorUnderLoadTest, EveryNodeSilentAtOnceFailsNoJob) {
  StartRunner();
  if (HasFatalFailure()) return;
  silent_ = true;
  Spin(1000ms);  // more than three lost timeouts
  EXPECT_EQ(coordinator_->registry().Find("node-1")->state, NodeState::kSuspect);
  EXPECT_EQ(coordinator_->registry().Find("node-2")->state, NodeState::kSuspect);
  EXPECT_TRUE(coordinator_->registry().full_disruption());
  EXPECT_EQ(not_ready_.count("node-1 Lost") + not_ready_.count("node-2 Lost"), 0u);
  silent_ = false;
  Spin(300ms);
  EXPECT_EQ(coordinator_->registry().Find("node-1")->state, NodeState::kReady);
  EXPECT_EQ(coordinator_->registry().Find("node-2")->state, NodeState::kReady);
  EXPECT_EQ(PhaseOf("runner"), v1::JOB_PHASE_RUNNING);
}

}  // namespace
}  // namespace trainlet::coordinator
