// Replicated jobs through the JobController: an initializer step planned beside the main ranks on
// every node, the start timeout held off while it runs, and its failure failing the attempt.

#include <set>

#include "tests/coordinator/controller_fixture.h"

namespace trainlet::coordinator::testing {
namespace {

// A plain runtime "steps" whose dataset-initializer runs `init` and whose node waits for it.
std::string StepsRuntime(int max_restarts = 0) {
  return "apiVersion: trainer.kubeflow.org/v1alpha1\n"
         "kind: ClusterTrainingRuntime\n"
         "metadata: {name: steps}\n"
         "spec:\n"
         "  mlPolicy: {numNodes: 1}\n"
         "  template:\n"
         "    spec:\n"
         "      failurePolicy: {maxRestarts: " +
         std::to_string(max_restarts) +
         "}\n"
         "      replicatedJobs:\n"
         "        - name: dataset-initializer\n"
         "          template:\n"
         "            spec:\n"
         "              template:\n"
         "                spec:\n"
         "                  containers:\n"
         "                    - name: dataset-initializer\n"
         "                      command: [sh, -c, 'sleep 1; echo data > data.txt']\n"
         "        - name: node\n"
         "          dependsOn: [{name: dataset-initializer, status: Complete}]\n"
         "          template:\n"
         "            spec:\n"
         "              template:\n"
         "                spec:\n"
         "                  containers:\n"
         "                    - name: node\n"
         "                      command: [/bin/true]\n";
}

class JobStepsTest : public ControllerFixture {
 protected:
  static constexpr int64_t kTimeout = 5000;

  void SetUp() override {
    ControllerFixture::SetUp();
    options_.start_timeout = std::chrono::milliseconds(kTimeout);
    MakeController();
    ApplyOk(StepsRuntime());
    ApplyOk(JobYaml("train", 2, 1, "steps"));
  }

  std::vector<uint32_t> RanksOfStep(const std::string& step) {
    std::vector<uint32_t> out;
    for (const auto& r : JobOrDie("train").ranks()) {
      if (r.step() == step) out.push_back(r.rank());
    }
    return out;
  }
};

TEST_F(JobStepsTest, EveryNodeRunsTheInitializerAfterTheMainWorld) {
  const auto& st = JobOrDie("train");
  ASSERT_EQ(PhaseName(st), "Starting");
  EXPECT_EQ(RanksOfStep(""), (std::vector<uint32_t>{0, 1}));
  EXPECT_EQ(RanksOfStep("dataset-initializer"), (std::vector<uint32_t>{2, 3}));
  EXPECT_EQ(st.attempts(0).rank_nodes_size(), 4);
  const auto plans = sink_.Plans();
  ASSERT_EQ(plans.size(), 2u);
  for (const auto& [node, plan] : plans) {
    // Two nodes: the main rank, which waits, is held until every node's initializer completed
    // (step_release.h); the plan carries only the initializer for now.
    ASSERT_EQ(plan.workers_size(), 1) << node;
    EXPECT_EQ(plan.workers(0).step(), "dataset-initializer");
    EXPECT_EQ(plan.workers(0).argv(0), "sh");
    EXPECT_FALSE(plan.workers(0).env().contains("TRAINLET_RESTART_REASON"));
    ASSERT_EQ(plan.steps_size(), 1);
    EXPECT_EQ(plan.steps(0).name(), "");
    EXPECT_EQ(plan.steps(0).depends_on(0).step(), "dataset-initializer");
  }
}

// Issue 18: dependsOn is JobSet's, on the whole replicated job: a node whose initializer
// finished first starts its `node` ranks only once every node's has (main started them at once).
TEST_F(JobStepsTest, TheMainRanksStartOnlyOnceEveryNodesInitializerCompleted) {
  const std::vector<uint32_t> inits = RanksOfStep("dataset-initializer");
  ASSERT_EQ(inits.size(), 2u);
  for (uint32_t r : inits) Report("train", r, v1::WorkerEvent::KIND_STARTED, kT0 + 10);
  Report("train", inits[0], v1::WorkerEvent::KIND_EXITED, kT0 + 20, 0);
  EXPECT_EQ(sink_.Plans().size(), 2u);  // nothing more: the other node's still runs
  // The start timeout waits for it too, though nothing runs on the first node any more.
  controller_->Schedule(kT0 + 3 * kTimeout);
  EXPECT_EQ(PhaseName(JobOrDie("train")), "Starting");
  Report("train", inits[1], v1::WorkerEvent::KIND_EXITED, kT0 + 3 * kTimeout + 1, 0);
  const auto plans = sink_.Plans();
  ASSERT_EQ(plans.size(), 4u);
  std::set<uint32_t> released;
  for (size_t i = 2; i < plans.size(); ++i) {
    ASSERT_EQ(plans[i].second.workers_size(), 1);
    EXPECT_EQ(plans[i].second.workers(0).step(), "");
    released.insert(plans[i].second.workers(0).rank());
    for (const auto& r : JobOrDie("train").ranks()) {
      if (r.rank() == plans[i].second.workers(0).rank()) EXPECT_EQ(r.node(), plans[i].first);
    }
  }
  EXPECT_EQ(released, (std::set<uint32_t>{0, 1}));
  ReportAll("train", v1::WorkerEvent::KIND_STARTED, kT0 + 3 * kTimeout + 2);
  EXPECT_EQ(PhaseName(JobOrDie("train")), "Running");
}

TEST_F(JobStepsTest, TheStartTimeoutWaitsForARunningInitializerAndCountsFromItsEnd) {
  for (uint32_t r : RanksOfStep("dataset-initializer")) {
    Report("train", r, v1::WorkerEvent::KIND_STARTED, kT0 + 10);
  }
  // Long past the timeout: the main ranks are held by an initializer that still runs.
  controller_->Schedule(kT0 + 3 * kTimeout);
  EXPECT_EQ(PhaseName(JobOrDie("train")), "Starting");
  EXPECT_EQ(controller_->NextWakeMs() > kT0 + 3 * kTimeout, true);

  const int64_t done = kT0 + 4 * kTimeout;
  for (uint32_t r : RanksOfStep("dataset-initializer")) {
    Report("train", r, v1::WorkerEvent::KIND_EXITED, done, 0);
  }
  EXPECT_EQ(JobOrDie("train").step_progress_unix_ms(), done);
  controller_->Schedule(done + kTimeout - 1);
  EXPECT_EQ(PhaseName(JobOrDie("train")), "Starting");
  // The main ranks never report: the timeout counts from the initializer's end.
  controller_->Schedule(done + kTimeout);
  const auto& st = JobOrDie("train");
  EXPECT_NE(PhaseName(st), "Starting");
  EXPECT_NE(st.attempts(0).cause().find("StartTimeout"), std::string::npos)
      << st.attempts(0).cause();
}

TEST_F(JobStepsTest, AFailedInitializerFailsTheAttemptNamingTheStep) {
  const uint32_t init = RanksOfStep("dataset-initializer").at(0);
  std::string node;
  for (const auto& r : JobOrDie("train").ranks()) {
    if (r.rank() == init) node = r.node();
  }
  Report("train", init, v1::WorkerEvent::KIND_STARTED, kT0 + 10);
  auto ev = Event("train", 1, init, v1::WorkerEvent::KIND_EXITED, 3);
  ev.set_message("no such dataset");
  controller_->OnWorkerEvent(node, ev, kT0 + 20);
  const auto& st = JobOrDie("train");
  EXPECT_EQ(PhaseName(st), "Failed");
  EXPECT_EQ(st.attempts(0).cause(),
            "step dataset-initializer on " + node + " exited with code 3: no such dataset");
  bool step_failed = false;
  for (const auto& e : st.events()) step_failed |= e.reason() == "StepFailed";
  EXPECT_TRUE(step_failed);
  for (uint32_t r : RanksOfStep("")) {
    EXPECT_EQ(Rank(st, r)->pid(), 0) << "rank " << r << " never started";
  }
}

TEST_F(JobStepsTest, TheJobSucceedsWhenEveryRankOfEveryStepExitedZero) {
  ReportAll("train", v1::WorkerEvent::KIND_STARTED, kT0 + 10);
  EXPECT_EQ(PhaseName(JobOrDie("train")), "Running");
  for (uint32_t r : RanksOfStep("dataset-initializer")) {
    Report("train", r, v1::WorkerEvent::KIND_EXITED, kT0 + 20, 0);
  }
  EXPECT_EQ(PhaseName(JobOrDie("train")), "Running");
  for (uint32_t r : RanksOfStep("")) Report("train", r, v1::WorkerEvent::KIND_EXITED, kT0 + 30, 0);
  EXPECT_EQ(PhaseName(JobOrDie("train")), "Succeeded");
}

// Issue 18: the coordinator restarts (a new controller over the same store) while the main ranks
// are held for the other node's initializer. Once the nodes settled (a beat kAckWaitMs after they
// registered), it holds them again, and sends them once, when that initializer completes: attempt
// 1 goes on. On main the new controller held nothing: they never went out, and the start timeout
// restarted the attempt.
TEST_F(JobStepsTest, HeldRanksOutliveACoordinatorRestartAndGoOutOnce) {
  const std::vector<uint32_t> inits = RanksOfStep("dataset-initializer");
  ASSERT_EQ(inits.size(), 2u);
  for (uint32_t r : inits) Report("train", r, v1::WorkerEvent::KIND_STARTED, kT0 + 10);
  Report("train", inits[0], v1::WorkerEvent::KIND_EXITED, kT0 + 20, 0);
  ASSERT_TRUE(controller_->Flush().ok());
  MakeController();  // kill -9: nothing held survives in memory
  sink_.sent.clear();
  controller_->Schedule(kT0 + 1000);  // the nodes have not beaten since they registered
  EXPECT_TRUE(sink_.Plans().empty());
  const auto beat = [&](int64_t at) {
    for (const char* n : {"n1", "n2", "n3"}) {
      ASSERT_NE(registry_.Heartbeat(std::string("key-") + n, std::string("rid-") + n,
                                    NodeRegistry::Clock::now(), at),
                nullptr);
    }
  };
  beat(kT0 + 3100);
  controller_->Schedule(kT0 + 3100);
  EXPECT_TRUE(sink_.Plans().empty());  // held again: the other node's initializer runs
  Report("train", inits[1], v1::WorkerEvent::KIND_EXITED, kT0 + 3200, 0);
  auto plans = sink_.Plans();
  ASSERT_EQ(plans.size(), 2u) << "the held ranks did not go out after the restart";
  std::set<uint32_t> released;
  for (const auto& [node, plan] : plans) {
    ASSERT_EQ(plan.workers_size(), 1);
    EXPECT_EQ(plan.workers(0).step(), "");
    EXPECT_EQ(plan.attempt(), 1u);
    released.insert(plan.workers(0).rank());
    EXPECT_EQ(Rank(JobOrDie("train"), plan.workers(0).rank())->node(), node);
  }
  EXPECT_EQ(released, (std::set<uint32_t>{0, 1}));
  // Never twice: later passes and events send nothing more.
  beat(kT0 + 4000);
  controller_->Schedule(kT0 + 4000);
  Report("train", inits[1], v1::WorkerEvent::KIND_EXITED, kT0 + 4001, 0);
  EXPECT_EQ(sink_.Plans().size(), 2u);
  for (uint32_t r : RanksOfStep("")) Report("train", r, v1::WorkerEvent::KIND_STARTED, kT0 + 4100);
  EXPECT_EQ(PhaseName(JobOrDie("train")), "Running");
  EXPECT_EQ(JobOrDie("train").attempt(), 1u);
  EXPECT_EQ(sink_.Plans().size(), 2u);
}

// The old coordinator released the main ranks just before it died: the one that started is never
// sent again; the one whose plan was lost with it (still Pending) goes out once.
TEST_F(JobStepsTest, RanksReleasedBeforeARestartAreNotSentAgain) {
  for (uint32_t r : RanksOfStep("dataset-initializer")) {
    Report("train", r, v1::WorkerEvent::KIND_STARTED, kT0 + 10);
    Report("train", r, v1::WorkerEvent::KIND_EXITED, kT0 + 20, 0);
  }
  ASSERT_EQ(sink_.Plans().size(), 4u);  // released
  const uint32_t started = RanksOfStep("").at(0);
  Report("train", started, v1::WorkerEvent::KIND_STARTED, kT0 + 30);
  ASSERT_TRUE(controller_->Flush().ok());
  MakeController();
  sink_.sent.clear();
  for (const char* n : {"n1", "n2", "n3"}) {
    ASSERT_NE(registry_.Heartbeat(std::string("key-") + n, std::string("rid-") + n,
                                  NodeRegistry::Clock::now(), kT0 + 3100),
              nullptr);
  }
  controller_->Schedule(kT0 + 3100);
  auto plans = sink_.Plans();
  ASSERT_EQ(plans.size(), 1u);
  ASSERT_EQ(plans[0].second.workers_size(), 1);
  EXPECT_EQ(plans[0].second.workers(0).rank(), RanksOfStep("").at(1));
  controller_->Schedule(kT0 + 3200);
  EXPECT_EQ(sink_.Plans().size(), 1u);
}

}  // namespace
}  // namespace trainlet::coordinator::testing
