// QueueCatalog (coordinator/queue_catalog.h) and Kueue's objects going through apply: one store
// transaction with the file's TrainJobs, all or nothing, kept across a restart, replaced by a
// re-apply, removed by delete; Kueue's own sample manifests accepted unchanged.
#include "coordinator/queue_catalog.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "controller_fixture.h"
#include "coordinator/operator_queues.h"

namespace trainlet::coordinator {
namespace {

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::filesystem::path FixtureDir() {
  return std::filesystem::path(TRAINLET_SOURCE_DIR) / "tests" / "fixtures" / "kueue";
}

constexpr const char* kSetup = R"(
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: h100}
spec:
  nodeLabels: {gpu: h100}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: team-a}
spec:
  namespaceSelector: {}
  cohort: research
  resourceGroups:
  - coveredResources: [cpu, nvidia.com/gpu]
    flavors:
    - name: h100
      resources:
      - {name: cpu, nominalQuota: 64}
      - {name: nvidia.com/gpu, nominalQuota: 8, lendingLimit: 4}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: team-b}
spec:
  cohort: research
  queueingStrategy: StrictFIFO
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: user-queue, namespace: team-a}
spec: {clusterQueue: team-a}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: WorkloadPriorityClass
metadata: {name: high}
value: 1000
)";

constexpr const char* kQueuedJob = R"(
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: queued
  labels:
    kueue.x-k8s.io/queue-name: nowhere
    kueue.x-k8s.io/priority-class: high
spec:
  runtimeRef: {name: plain}
  suspend: true
  trainer:
    command: ["true"]
)";

using QueueApplyTest = testing::ControllerFixture;

TEST_F(QueueApplyTest, ApplyStoresAndLooksUp) {
  v1::ApplyResult r = ApplyOk(kSetup);
  ASSERT_EQ(r.created_size(), 5);
  EXPECT_EQ(r.created(0), "ResourceFlavor/h100");
  EXPECT_EQ(r.created(3), "LocalQueue/team-a/user-queue");
  const QueueCatalog& q = controller_->queues();
  EXPECT_EQ(q.size(), 5u);
  ASSERT_NE(q.ClusterQueueOf("team-a", "user-queue"), nullptr);
  EXPECT_EQ(q.ClusterQueueOf("team-a", "user-queue")->name, "team-a");
  EXPECT_EQ(q.ClusterQueueOf("default", "user-queue"), nullptr);
  EXPECT_EQ(q.PriorityValue("high"), 1000);
  EXPECT_EQ(q.PriorityValue("low"), std::nullopt);
  ASSERT_NE(q.FindFlavor("h100"), nullptr);
  EXPECT_EQ(q.FindFlavor("h100")->node_labels.at("gpu"), "h100");
  auto cohort = q.CohortMembers("research");
  ASSERT_EQ(cohort.size(), 2u);
  EXPECT_EQ(cohort[1]->name, "team-b");
  EXPECT_EQ(store_->ListQueueObjects()->size(), 5u);

  // Applied again: unchanged, nothing written; a changed one is configured and replaced. The
  // generation moves only with a change (placement retries jobs then, flavor_constraint.h).
  const uint64_t generation = q.generation();
  r = ApplyOk(kSetup);
  EXPECT_EQ(r.unchanged_size(), 5);
  EXPECT_EQ(q.generation(), generation);
  std::string changed = kSetup;
  changed.replace(changed.find("value: 1000"), 11, "value: 7");
  r = ApplyOk(changed);
  ASSERT_EQ(r.configured_size(), 1);
  EXPECT_EQ(r.configured(0), "WorkloadPriorityClass/high");
  EXPECT_EQ(q.PriorityValue("high"), 7);
  EXPECT_GT(q.generation(), generation);
}

TEST_F(QueueApplyTest, RestartKeepsThem) {
  ApplyOk(kSetup);
  MakeController();  // a fresh controller over the same store, as after a restart
  const QueueCatalog& q = controller_->queues();
  EXPECT_EQ(q.size(), 5u);
  ASSERT_NE(q.FindClusterQueue("team-a"), nullptr);
  const auto& gpu = q.FindClusterQueue("team-a")->resource_groups[0].flavors[0].resources[1];
  EXPECT_EQ(gpu.nominal.units, 8);
  EXPECT_EQ(gpu.lending_limit->units, 4);
  EXPECT_EQ(q.FindClusterQueue("team-b")->queueing_strategy, kueue::QueueingStrategy::kStrictFifo);
}

TEST_F(QueueApplyTest, OneBadKueueDocumentStoresNothingOfTheFile) {
  const std::string bad = std::string(kQueuedJob) + "---\n" + kSetup +
                          "---\napiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\n"
                          "metadata: {name: broken}\nspec:\n  queueingStrategy: Sometimes\n";
  auto r = controller_->Apply(bad, "team.yaml", kT0);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kInvalid);
  EXPECT_NE(r.status().message().find("team.yaml: ClusterQueue/broken: spec.queueingStrategy"),
            std::string::npos)
      << r.status().message();
  EXPECT_TRUE(store_->ListQueueObjects()->empty());
  EXPECT_TRUE(store_->ListJobs()->empty());
  EXPECT_EQ(controller_->queues().size(), 0u);
  EXPECT_EQ(controller_->Find("queued"), nullptr);
}

TEST_F(QueueApplyTest, QueuedJobNamingAMissingQueueIsAcceptedAndCarriesItsLabels) {
  v1::ApplyResult r = ApplyOk(kQueuedJob);
  ASSERT_EQ(r.created_size(), 1);
  EXPECT_EQ(r.created(0), "trainjob/queued");
  for (const auto& w : r.warnings()) EXPECT_EQ(w.find("kueue"), std::string::npos) << w;
  EXPECT_NE(controller_->Find("queued"), nullptr);
  const JobEntry* held = controller_->Held()("queued");
  ASSERT_NE(held, nullptr);
  EXPECT_EQ(held->spec.queue_name, "nowhere");
  EXPECT_EQ(held->spec.priority_class, "high");
}

// The store refuses the file's TrainJob at commit (a record of that name is there already, which
// this controller does not hold): the file's queue objects are not stored either, and the catalog
// is unchanged.
TEST_F(QueueApplyTest, AStoreRefusalOfTheFileLeavesNoQueueObject) {
  JobRecord taken;
  taken.name = "queued";
  taken.spec_yaml = "kind: TrainJob\n";
  taken.runtime_kind = "ClusterTrainingRuntime";
  taken.runtime_name = "plain";
  taken.runtime_yaml = "kind: ClusterTrainingRuntime\n";
  taken.status.set_name("queued");
  ASSERT_TRUE(store_->CreateJob(taken).ok());
  auto r = controller_->Apply(std::string(kSetup) + "---\n" + kQueuedJob, "team.yaml", kT0);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kExists) << r.status().ToString();
  EXPECT_TRUE(store_->ListQueueObjects()->empty());
  EXPECT_EQ(controller_->queues().size(), 0u);
}

TEST_F(QueueApplyTest, LocalQueueClusterQueueIsImmutable) {
  ApplyOk(kSetup);
  std::string moved = kSetup;
  moved.replace(moved.find("spec: {clusterQueue: team-a}"), 28, "spec: {clusterQueue: team-b}");
  auto r = controller_->Apply(moved, "moved.yaml", kT0);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(
                "moved.yaml: LocalQueue/user-queue: spec.clusterQueue: field is immutable"),
            std::string::npos)
      << r.status().message();
  EXPECT_EQ(controller_->queues().FindLocalQueue("team-a", "user-queue")->cluster_queue, "team-a");
}

TEST_F(QueueApplyTest, OperatorListsAndDeletes) {
  ApplyOk(kSetup);
  v1::QueueObjectsRequest req;
  req.set_kind("ClusterQueue");
  auto list = HandleQueueObjects(req, controller_->queues(), *store_, {}, kT0, "");
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  ASSERT_EQ(list->objects_size(), 2);
  EXPECT_EQ(list->objects(0).cohort(), "research");
  EXPECT_EQ(list->objects(0).queueing_strategy(), "BestEffortFIFO");
  EXPECT_EQ(list->objects(1).queueing_strategy(), "StrictFIFO");
  EXPECT_TRUE(list->objects(0).has_usage());

  req.set_kind("LocalQueue");  // namespace "" is default: none there
  list = HandleQueueObjects(req, controller_->queues(), *store_, {}, kT0, "");
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->objects_size(), 0);
  req.set_all_namespaces(true);
  list = HandleQueueObjects(req, controller_->queues(), *store_, {}, kT0, "");
  ASSERT_EQ(list->objects_size(), 1);
  EXPECT_EQ(list->objects(0).namespace_(), "team-a");
  EXPECT_EQ(list->objects(0).cluster_queue(), "team-a");

  req.set_kind("WorkloadPriorityClass");
  req.set_name("high");
  list = HandleQueueObjects(req, controller_->queues(), *store_, {}, kT0, "");
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->objects(0).value(), 1000);
  EXPECT_NE(list->objects(0).yaml().find("value: 1000"), std::string::npos);

  req.set_remove(true);
  const uint64_t generation = controller_->queues().generation();
  ASSERT_TRUE(HandleQueueObjects(req, controller_->queues(), *store_, {}, kT0, "").ok());
  EXPECT_EQ(controller_->queues().FindPriorityClass("high"), nullptr);
  EXPECT_GT(controller_->queues().generation(), generation);
  auto again = HandleQueueObjects(req, controller_->queues(), *store_, {}, kT0, "");
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(again.status().message(), "WorkloadPriorityClass/high not found");
  MakeController();
  EXPECT_EQ(controller_->queues().FindPriorityClass("high"), nullptr);  // the delete was stored

  req.set_kind("Workload");
  auto bad = HandleQueueObjects(req, controller_->queues(), *store_, {}, kT0, "");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), ErrorCode::kInvalid);
}

// The Terminating mark (Kueue's resource-in-use finalizer) is a cluster value of its own, stored
// before memory takes it, read back at load, and removed with its object in one transaction; a
// mark whose object is not held is dropped at load, so it cannot make a later object Terminating.
TEST_F(QueueApplyTest, TerminatingMarksAreStoredLoadedAndRemovedWithTheirObject) {
  ApplyOk(kSetup);
  QueueCatalog& q = controller_->queues();
  const uint64_t generation = q.generation();
  ASSERT_TRUE(q.MarkDeleting(kueue::Kind::kResourceFlavor, "h100", kT0, "alice", *store_).ok());
  EXPECT_GT(q.generation(), generation);
  EXPECT_TRUE(q.Terminating(kueue::Kind::kResourceFlavor, "h100"));
  EXPECT_EQ(*store_->GetClusterValue("queue-deleting/ResourceFlavor/h100"),
            R"({"by":"alice","deletedMs":1700000000000,"version":1})");
  EXPECT_EQ(q.MarkDeleting(kueue::Kind::kLocalQueue, "user-queue", kT0, "", *store_).code(),
            ErrorCode::kInvalid);
  EXPECT_EQ(q.MarkDeleting(kueue::Kind::kClusterQueue, "ghost", kT0, "", *store_).code(),
            ErrorCode::kNotFound);
  EXPECT_EQ(q.terminating_count(), 1u);

  ASSERT_TRUE(store_
                  ->PutClusterValue("queue-deleting/ClusterQueue/ghost",
                                    R"({"by":"","deletedMs":1,"version":1})")
                  .ok());
  MakeController();
  QueueCatalog& loaded = controller_->queues();
  ASSERT_NE(loaded.DeletionOf(kueue::Kind::kResourceFlavor, "", "h100"), nullptr);
  EXPECT_EQ(loaded.DeletionOf(kueue::Kind::kResourceFlavor, "", "h100")->unix_ms, kT0);
  EXPECT_EQ(loaded.terminating_count(), 1u);
  EXPECT_EQ(*store_->GetClusterValue("queue-deleting/ClusterQueue/ghost"), "");

  ASSERT_TRUE(loaded.Delete(kueue::Kind::kResourceFlavor, "", "h100", *store_).ok());
  EXPECT_EQ(*store_->GetClusterValue("queue-deleting/ResourceFlavor/h100"), "");
  EXPECT_EQ(loaded.terminating_count(), 0u);
  // Applied again once gone: a new object, not Terminating.
  ApplyOk(kSetup);
  EXPECT_FALSE(controller_->queues().Terminating(kueue::Kind::kResourceFlavor, "h100"));
}

// Kueue's and Kubeflow's sample manifests (tests/fixtures/kueue/README.md), applied unchanged.
TEST_F(QueueApplyTest, KueueSamplesAreAcceptedUnchanged) {
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(FixtureDir())) {
    if (entry.path().extension() != ".yaml") continue;
    ++files;
    auto r = controller_->Apply(ReadFile(entry.path()), entry.path().filename().string(), kT0);
    ASSERT_TRUE(r.ok()) << entry.path() << ": " << r.status().ToString();
    EXPECT_GT(r->created_size() + r->configured_size() + r->unchanged_size(), 0) << entry.path();
  }
  EXPECT_GE(files, 15);
  EXPECT_NE(controller_->queues().FindClusterQueue("cluster-queue"), nullptr);
  EXPECT_NE(controller_->queues().FindLocalQueue("default", "user-queue"), nullptr);
  EXPECT_NE(controller_->queues().FindPriorityClass("sample-priority"), nullptr);
  EXPECT_NE(controller_->Find("kueue-example"), nullptr);
}

}  // namespace
}  // namespace trainlet::coordinator
