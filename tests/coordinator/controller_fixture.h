// A JobController over a real SQLite store in a temporary dir, a NodeRegistry driven by an
// injected clock, and a NodeSink that records what would go to the agents. Shared by the
// job_controller and operator_service tests.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "coordinator/job_controller.h"
#include "coordinator/job_state_machine.h"
#include "coordinator/job_store.h"
#include "coordinator/node_registry.h"
#include "coordinator/rank_state_machine.h"

namespace trainlet::coordinator {

// The typed states by the names the coordinator gives them, so assertions read as before the
// states were enums ("Running", "StartFailed", "" for a running attempt).
inline std::string PhaseName(const v1::JobStatus& s) { return JobPhaseName(PhaseOf(s)); }
inline std::string PhaseName(const v1::SuspendJobResult& r) {
  return JobPhaseName(static_cast<JobPhase>(r.job_phase()));
}
inline std::string StateName(const v1::RankStatus& r) { return RankStateName(r.rank_state()); }
inline std::string ResultName(const v1::AttemptRecord& a) {
  return AttemptResultName(a.attempt_result());
}

}  // namespace trainlet::coordinator

namespace trainlet::coordinator::testing {

// Records every (node, envelope) the controller sends, in order.
class RecordingSink : public NodeSink {
 public:
  void SendToNode(const std::string& node, v1::Envelope env) override {
    sent.emplace_back(node, std::move(env));
  }
  std::vector<std::pair<std::string, v1::LaunchPlan>> Plans() const {
    std::vector<std::pair<std::string, v1::LaunchPlan>> out;
    for (const auto& [node, env] : sent) {
      if (env.has_launch_plan()) out.emplace_back(node, env.launch_plan());
    }
    return out;
  }
  std::vector<std::pair<std::string, v1::StopWorkers>> Stops() const {
    std::vector<std::pair<std::string, v1::StopWorkers>> out;
    for (const auto& [node, env] : sent) {
      if (env.has_stop_workers()) out.emplace_back(node, env.stop_workers());
    }
    return out;
  }
  std::vector<std::string> StopNodes() const {
    std::vector<std::string> out;
    for (const auto& [node, stop] : Stops()) out.push_back(node);
    std::sort(out.begin(), out.end());
    return out;
  }
  std::vector<std::pair<std::string, v1::Envelope>> sent;
};

// A ClusterTrainingRuntime with no mlPolicy framework (so: plain) unless `ml_policy_extra` adds
// one (e.g. "    torch: {}\n"), and spec.template.spec.failurePolicy.maxRestarts when >= 0.
inline std::string RuntimeYaml(const std::string& name, const std::string& ml_policy_extra = "",
                               int max_restarts = -1) {
  std::string y = "apiVersion: trainer.kubeflow.org/v1alpha1\n";
  y += "kind: ClusterTrainingRuntime\n";
  y += "metadata:\n";
  y += "  name: " + name + "\n";
  y += "spec:\n";
  y += "  mlPolicy:\n";
  y += "    numNodes: 1\n";
  y += ml_policy_extra;
  y += "  template:\n";
  y += "    spec:\n";
  if (max_restarts >= 0) {
    y += "      failurePolicy:\n";
    y += "        maxRestarts: " + std::to_string(max_restarts) + "\n";
  }
  y += "      replicatedJobs:\n";
  y += "        - name: node\n";
  y += "          template:\n";
  y += "            spec:\n";
  y += "              template:\n";
  y += "                spec:\n";
  y += "                  containers:\n";
  y += "                    - name: node\n";
  y += "                      command: [\"/bin/true\"]\n";
  return y;
}

// A TrainJob like examples/hello: `nodes` nodes of `procs` ranks each, whose command echoes
// `echo` (so two specs can differ).
inline std::string JobYaml(const std::string& name, int nodes, int procs,
                           const std::string& runtime = "plain",
                           const std::string& echo = "hello") {
  std::string y = "apiVersion: trainer.kubeflow.org/v1alpha1\n";
  y += "kind: TrainJob\n";
  y += "metadata:\n";
  y += "  name: " + name + "\n";
  y += "spec:\n";
  y += "  runtimeRef:\n";
  y += "    name: " + runtime + "\n";
  y += "  trainer:\n";
  y += "    numNodes: " + std::to_string(nodes) + "\n";
  y += "    numProcPerNode: " + std::to_string(procs) + "\n";
  y += "    command: [\"/bin/sh\", \"-c\", \"echo " + echo + " $TRAINLET_RANK\"]\n";
  return y;
}

inline v1::WorkerEvent Event(const std::string& job, uint32_t attempt, uint32_t rank,
                             v1::WorkerEvent::Kind kind, int exit_code = 0, int signal = 0) {
  v1::WorkerEvent ev;
  ev.set_job(job);
  ev.set_attempt(attempt);
  ev.set_rank(rank);
  ev.set_kind(kind);
  ev.set_pid(static_cast<int32_t>(1000 + rank));
  ev.set_exit_code(exit_code);
  ev.set_signal(signal);
  return ev;
}

class ControllerFixture : public ::testing::Test {
 protected:
  using Clock = NodeRegistry::Clock;
  static constexpr int64_t kT0 = 1'700'000'000'000;  // wall clock ms of the test's start

  void SetUp() override {
    char tmpl[] = "/tmp/trainlet-controller-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    state_dir_ = root_ + "/state";
    auto store = JobStore::Open(state_dir_);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(store).value();
    for (const char* n : {"n1", "n2", "n3"}) AddNode(n);
    MakeController();
  }
  void TearDown() override {
    controller_.reset();
    store_.reset();
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
  }

  // A fresh controller over the same store, loading the runtimes trainlet ships.
  void MakeController() {
    controller_ = std::make_unique<JobController>(store_.get(), &registry_, &sink_, options_);
    Status s = controller_->Load(std::string(TRAINLET_SOURCE_DIR) + "/deploy/runtimes");
    ASSERT_TRUE(s.ok()) << s.ToString();
  }

  void AddNode(const std::string& name, uint32_t slots = 4) {
    v1::NodeInfo info;
    info.set_name(name);
    info.set_address("127.0.0." + std::to_string(registry_.nodes().size() + 1));
    info.set_hostname(name);
    info.set_slots(slots);
    Status s = registry_.Register(info, "rid-" + name, "key-" + name, Clock::now(), kT0);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }

  v1::ApplyResult ApplyOk(const std::string& yaml, int64_t now_ms = kT0) {
    auto r = controller_->Apply(yaml, "test.yaml", now_ms);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? std::move(r).value() : v1::ApplyResult{};
  }

  const v1::JobStatus& JobOrDie(const std::string& name) {
    const v1::JobStatus* j = controller_->Find(name);
    if (j == nullptr) {
      ADD_FAILURE() << "trainjob/" << name << " not found";
      static const v1::JobStatus kEmpty;
      return kEmpty;
    }
    return *j;
  }

  // Every rank of the job's current attempt reports `kind` from the node it was placed on.
  void ReportAll(const std::string& job, v1::WorkerEvent::Kind kind, int64_t now_ms,
                 int exit_code = 0, int signal = 0) {
    const v1::JobStatus st = JobOrDie(job);  // a copy: events change it
    for (const auto& r : st.ranks()) {
      controller_->OnWorkerEvent(
          r.node(), Event(job, st.attempt(), r.rank(), kind, exit_code, signal), now_ms);
    }
  }
  void Report(const std::string& job, uint32_t rank, v1::WorkerEvent::Kind kind, int64_t now_ms,
              int exit_code = 0, int signal = 0) {
    const v1::JobStatus& st = JobOrDie(job);
    std::string node;
    for (const auto& r : st.ranks()) {
      if (r.rank() == rank) node = r.node();
    }
    ASSERT_FALSE(node.empty()) << "rank " << rank << " of " << job << " is not placed";
    controller_->OnWorkerEvent(node, Event(job, st.attempt(), rank, kind, exit_code, signal),
                               now_ms);
  }

  // hello: ranks 0-1 on n1, 2-3 on n2, started; then n2 goes silent and the registry (as the
  // coordinator's tick does) declares it Lost, and the controller hears of it (at kT0 + 10 s).
  void RunHelloThenLoseN2() {
    ApplyOk(JobYaml("hello", 2, 2));
    ReportAll("hello", v1::WorkerEvent::KIND_STARTED, kT0 + 1);
    ASSERT_EQ(JobOrDie("hello").placement(1), "n2");
    const auto later = Clock::now() + std::chrono::seconds(10);
    for (const char* n : {"n1", "n3"}) {
      ASSERT_NE(registry_.Heartbeat(std::string("key-") + n, std::string("rid-") + n,
                                    later - std::chrono::seconds(1), kT0 + 9000),
                nullptr);
    }
    ASSERT_EQ(registry_.Tick(later), std::vector<std::string>{"n2"});
    controller_->OnNodeLost("n2", kT0 + 10000);
  }

  // The job as the store has it (after Flush).
  std::optional<JobRecord> Stored(const std::string& name) {
    auto r = store_->GetJob(name);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : std::nullopt;
  }
  std::vector<std::string> StoredNames() {
    auto r = store_->ListJobs();
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    std::vector<std::string> names;
    if (r.ok()) {
      for (const auto& j : *r) names.push_back(j.name);
    }
    return names;
  }

  static const v1::RankStatus* Rank(const v1::JobStatus& st, uint32_t rank) {
    for (const auto& r : st.ranks()) {
      if (r.rank() == rank) return &r;
    }
    return nullptr;
  }
  static const v1::Condition* Cond(const v1::JobStatus& st, const std::string& type) {
    for (const auto& c : st.conditions()) {
      if (c.type() == type) return &c;
    }
    return nullptr;
  }

  std::string root_;
  std::string state_dir_;
  JobControllerOptions options_;
  std::unique_ptr<JobStore> store_;
  NodeRegistry registry_{std::chrono::milliseconds(1000), std::chrono::milliseconds(3000)};
  RecordingSink sink_;
  std::unique_ptr<JobController> controller_;
};

}  // namespace trainlet::coordinator::testing
