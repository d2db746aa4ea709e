// JobController over the etcd store, on a real 3-member cluster: an apply is stored in etcd
// before it is answered; without quorum an apply is refused with an error that says so, and
// nothing of it is kept in memory; with quorum back applies work again, and a restarted
// controller reloads every job from etcd.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "coordinator/etcd_job_store.h"
#include "tests/coordinator/controller_fixture.h"
#include "tests/coordinator/etcd_cluster.h"

namespace trainlet::coordinator {
namespace {

using testing::JobYaml;
using trainlet::testing::EtcdCluster;

class JobControllerEtcdTest : public testing::ControllerFixture {
 protected:
  void SetUp() override {
    testing::ControllerFixture::SetUp();
    if (EtcdCluster::Binary().empty()) GTEST_SKIP() << "etcd is not installed";
    std::string error;
    cluster_ = EtcdCluster::Start(3, &error);
    ASSERT_NE(cluster_, nullptr) << error;
    EtcdStoreConfig config;
    config.client.endpoints = cluster_->client_urls();
    config.client.request_timeout = std::chrono::seconds(2);
    auto store = EtcdJobStore::Open(config);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    controller_.reset();
    store_ = std::move(store).value();
    MakeController();
  }
  void TearDown() override {
    testing::ControllerFixture::TearDown();
    cluster_.reset();
  }

  std::unique_ptr<EtcdCluster> cluster_;
};

TEST_F(JobControllerEtcdTest, ApplyIsRefusedWithoutQuorumAndWorksWhenItReturns) {
  ApplyOk(JobYaml("first", 2, 1));
  EXPECT_EQ(StoredNames(), (std::vector<std::string>{"first"}));  // stored before the answer
  controller_->Schedule(kT0);
  ASSERT_TRUE(controller_->Flush().ok());
  EXPECT_EQ(PhaseName(Stored("first")->status), PhaseName(JobOrDie("first")));

  const int leader = cluster_->Leader();
  ASSERT_GE(leader, 0);
  const int a = (leader + 1) % 3;
  const int b = (leader + 2) % 3;
  cluster_->Kill(a);
  cluster_->Kill(b);
  // An election timeout later the last member knows it has no leader.
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  const auto t0 = std::chrono::steady_clock::now();
  auto refused = controller_->Apply(JobYaml("second", 1, 1), "second.yaml", kT0 + 1000);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), ErrorCode::kUnavailable) << refused.status().ToString();
  EXPECT_NE(refused.status().message().find("no quorum"), std::string::npos)
      << refused.status().message();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  EXPECT_EQ(controller_->Find("second"), nullptr);  // nothing kept that was not stored

  ASSERT_TRUE(cluster_->Restart(a));
  ASSERT_TRUE(cluster_->WaitServing(a, 15000)) << cluster_->LogTail(a);
  ApplyOk(JobYaml("second", 1, 1), kT0 + 2000);
  controller_->Schedule(kT0 + 2000);
  ASSERT_TRUE(controller_->Flush().ok());

  MakeController();  // a restarted (or newly elected) coordinator
  ASSERT_NE(controller_->Find("first"), nullptr);
  ASSERT_NE(controller_->Find("second"), nullptr);
  EXPECT_EQ(StoredNames(), (std::vector<std::string>{"first", "second"}));
}

// A flush after a mass change (here 150 jobs, 12 placed and 138 Unschedulable, in one Schedule)
// writes in transactions of JobController::kFlushBatch: one transaction of every dirty job would
// pass etcd's 128 operations and fail whole, every tick, and nothing would be stored again.
TEST_F(JobControllerEtcdTest, FlushOfMoreJobsThanATransactionHoldsIsWrittenInBatches) {
  static_assert(JobController::kFlushBatch < 128);
  for (int file = 0; file < 15; ++file) {
    std::string yaml;
    for (int i = 0; i < 10; ++i) {
      yaml += (yaml.empty() ? "" : "---\n") + JobYaml("j" + std::to_string(file * 10 + i), 1, 1);
    }
    ApplyOk(yaml);
  }
  controller_->Schedule(kT0 + 10);
  Status flushed = controller_->Flush();
  ASSERT_TRUE(flushed.ok()) << flushed.ToString();
  MakeController();  // what etcd holds, read back
  size_t unschedulable = 0;
  for (const v1::JobStatus* st : controller_->List()) {
    if (st->reason().rfind("Unschedulable", 0) == 0) ++unschedulable;
  }
  EXPECT_EQ(controller_->List().size(), 150u);
  EXPECT_GE(unschedulable, 100u) << "the statuses written by the flush were not all stored";
}

// Issue 18: a new leader over the etcd store takes over a 2-node attempt whose `node` ranks the
// old one held for every node's initializer (step_release.h). Its JobController::Load is the
// restarted coordinator's: once the nodes settled it holds them again, and sends them once, when
// the last initializer completed, in the same attempt.
TEST_F(JobControllerEtcdTest, ANewLeaderHoldsWhatTheOldOneHeldAndReleasesItOnce) {
  ApplyOk(
      "apiVersion: trainer.kubeflow.org/v1alpha1\n"
      "kind: ClusterTrainingRuntime\n"
      "metadata: {name: steps}\n"
      "spec:\n"
      "  mlPolicy: {numNodes: 1}\n"
      "  template:\n"
      "    spec:\n"
      "      replicatedJobs:\n"
      "        - name: dataset-initializer\n"
      "          template: {spec: {template: {spec: {containers: "
      "[{name: dataset-initializer, command: [/bin/true]}]}}}}\n"
      "        - name: node\n"
      "          dependsOn: [{name: dataset-initializer, status: Complete}]\n"
      "          template: {spec: {template: {spec: {containers: [{name: node, command: "
      "[/bin/true]}]}}}}\n");
  ApplyOk(JobYaml("train", 2, 1, "steps"));
  ASSERT_EQ(sink_.Plans().size(), 2u);  // the initializers; `node` is held
  std::vector<uint32_t> inits;
  for (const auto& r : JobOrDie("train").ranks()) {
    if (!r.step().empty()) inits.push_back(r.rank());
  }
  ASSERT_EQ(inits.size(), 2u);
  for (uint32_t r : inits) Report("train", r, v1::WorkerEvent::KIND_STARTED, kT0 + 10);
  ASSERT_TRUE(controller_->Flush().ok());

  MakeController();  // the new leader: what etcd holds, and nothing held in memory
  sink_.sent.clear();
  for (const char* n : {"n1", "n2", "n3"}) {
    ASSERT_NE(registry_.Heartbeat(std::string("key-") + n, std::string("rid-") + n,
                                  NodeRegistry::Clock::now(), kT0 + 3100),
              nullptr);
  }
  controller_->Schedule(kT0 + 3100);
  EXPECT_TRUE(sink_.Plans().empty());
  for (uint32_t r : inits) Report("train", r, v1::WorkerEvent::KIND_EXITED, kT0 + 3200, 0);
  ASSERT_EQ(sink_.Plans().size(), 2u) << "the held ranks did not go out after the failover";
  for (const auto& [node, plan] : sink_.Plans()) {
    ASSERT_EQ(plan.workers_size(), 1) << node;
    EXPECT_EQ(plan.workers(0).step(), "");
  }
  controller_->Schedule(kT0 + 3300);
  EXPECT_EQ(sink_.Plans().size(), 2u);
  EXPECT_EQ(JobOrDie("train").attempt(), 1u);
}

}  // namespace
}  // namespace trainlet::coordinator
