// Kueue's resource-in-use finalizer through a real JobController (coordinator/queue_in_use.h,
// QueueCatalog::MarkDeleting), on each store: SQLite, and etcd on a real one-member cluster. A
// ResourceFlavor or ClusterQueue deleted while in use stays, Terminating, with the mark stored
// before the delete is answered; a restarted controller keeps it Terminating; a Terminating
// ClusterQueue admits nothing new and its pending jobs say why; each goes by itself once its last
// user is gone (a job finished, a ClusterQueue edited or gone).
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "coordinator/etcd_job_store.h"
#include "coordinator/operator_queues.h"
#include "tests/coordinator/controller_fixture.h"
#include "tests/coordinator/etcd_cluster.h"

namespace trainlet::coordinator {
namespace {

using trainlet::testing::EtcdCluster;

// ClusterQueue research takes cpu from flavor a100 (1 cpu), then h100 (1 cpu); flavor spare is
// named by no ClusterQueue.
constexpr const char* kQueues = R"(
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: a100}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: h100}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: spare}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: research}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: a100
      resources:
      - {name: cpu, nominalQuota: 1}
    - name: h100
      resources:
      - {name: cpu, nominalQuota: 1}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {namespace: default, name: lq}
spec: {clusterQueue: research}
)";

// research again, naming h100 only.
constexpr const char* kResearchWithoutA100 = R"(
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: research}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: h100
      resources:
      - {name: cpu, nominalQuota: 1}
)";

std::string Job(const std::string& name) {
  return "apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata:\n  name: " + name +
         "\n  labels: {kueue.x-k8s.io/queue-name: lq}\nspec:\n  runtimeRef: {name: plain}\n"
         "  trainer:\n    numNodes: 1\n    resourcesPerNode: {requests: {cpu: \"1\"}}\n"
         "    command: [\"true\"]\n";
}

// "sqlite": the fixture's store; "etcd": a store under a fresh prefix of one real member.
class QueueDeletionTest : public testing::ControllerFixture,
                          public ::testing::WithParamInterface<std::string> {
 protected:
  void SetUp() override {
    testing::ControllerFixture::SetUp();
    if (GetParam() == "etcd") {
      if (EtcdCluster::Binary().empty()) GTEST_SKIP() << "etcd is not installed";
      std::string error;
      etcd_ = EtcdCluster::Start(1, &error);
      ASSERT_NE(etcd_, nullptr) << error;
      EtcdStoreConfig config;
      config.client.endpoints = etcd_->client_urls();
      config.prefix = "/trainlet-queue-deletion/" + std::to_string(getpid()) + "/";
      auto store = EtcdJobStore::Open(config);
      ASSERT_TRUE(store.ok()) << store.status().ToString();
      controller_.reset();
      store_ = std::move(store).value();
      MakeController();
    }
    // The fixture's nodes have no cpu to give: one with 8, so quota, not room, binds.
    v1::NodeInfo info;
    info.set_name("cpu-node");
    info.set_address("127.0.0.9");
    info.set_hostname("cpu-node");
    info.set_slots(8);
    (*info.mutable_allocatable())["cpu"] = 8;
    ASSERT_TRUE(registry_.Register(info, "rid-cpu", "key-cpu", Clock::now(), kT0).ok());
  }
  void TearDown() override {
    testing::ControllerFixture::TearDown();
    etcd_.reset();
  }

  // trainletctl delete <kind> <name>, as OperatorService hands it on.
  Result<v1::QueueObjectList> Delete(const std::string& kind, const std::string& name,
                                     int64_t now_ms, const std::string& user = "alice") {
    v1::QueueObjectsRequest req;
    req.set_kind(kind);
    req.set_name(name);
    req.set_remove(true);
    return HandleQueueObjects(req, controller_->queues(), *store_, controller_->List(), now_ms,
                              user);
  }
  // trainletctl get <kind> <name> -o json: the object as the operator API shows it.
  v1::QueueObject Get(const std::string& kind, const std::string& name) {
    v1::QueueObjectsRequest req;
    req.set_kind(kind);
    req.set_name(name);
    auto list =
        HandleQueueObjects(req, controller_->queues(), *store_, controller_->List(), kT0, "alice");
    EXPECT_TRUE(list.ok()) << list.status().ToString();
    return list.ok() && list->objects_size() == 1 ? list->objects(0) : v1::QueueObject{};
  }
  bool Stored(const std::string& kind, const std::string& name) {
    auto all = store_->ListQueueObjects();
    EXPECT_TRUE(all.ok()) << all.status().ToString();
    for (const auto& o : all.ok() ? *all : std::vector<QueueObjectRecord>{}) {
      if (o.kind == kind && o.name == name) return true;
    }
    return false;
  }
  std::string StoredMark(const std::string& kind, const std::string& name) {
    auto v =
        store_->GetClusterValue(std::string(QueueCatalog::kDeletionPrefix) + kind + "/" + name);
    EXPECT_TRUE(v.ok()) << v.status().ToString();
    return v.ok() ? *v : "";
  }

  std::unique_ptr<EtcdCluster> etcd_;
};

INSTANTIATE_TEST_SUITE_P(Stores, QueueDeletionTest, ::testing::Values("sqlite", "etcd"),
                         [](const auto& info) { return info.param; });

TEST_P(QueueDeletionTest, AFlavorInUseStaysTerminatingAcrossARestartAndGoesWithItsLastUser) {
  ApplyOk(kQueues);
  ApplyOk(Job("first"));
  controller_->Schedule(kT0);
  ASSERT_TRUE(JobOrDie("first").has_admission());
  ASSERT_EQ(JobOrDie("first").admission().resources(0).flavor(), "a100");

  // An unused flavor goes at once, as before.
  auto spare = Delete("ResourceFlavor", "spare", kT0 + 50);
  ASSERT_TRUE(spare.ok()) << spare.status().ToString();
  EXPECT_EQ(controller_->queues().FindFlavor("spare"), nullptr);
  EXPECT_FALSE(Stored("ResourceFlavor", "spare"));

  // a100 is named by research and held by first: it stays, Terminating, the mark stored.
  auto deleted = Delete("ResourceFlavor", "a100", kT0 + 100);
  ASSERT_TRUE(deleted.ok()) << deleted.status().ToString();
  ASSERT_EQ(deleted->objects_size(), 1);
  const v1::QueueObject& shown = deleted->objects(0);
  EXPECT_EQ(shown.deletion_timestamp(), "2023-11-14T22:13:20Z");  // kT0 + 100 ms
  ASSERT_EQ(shown.finalizers_size(), 1);
  EXPECT_EQ(shown.finalizers(0), "kueue.x-k8s.io/resource-in-use");
  EXPECT_EQ(std::vector<std::string>(shown.in_use_by().begin(), shown.in_use_by().end()),
            (std::vector<std::string>{"ClusterQueue research", "TrainJob first"}));
  ASSERT_NE(controller_->queues().FindFlavor("a100"), nullptr);
  EXPECT_TRUE(controller_->queues().Terminating(kueue::Kind::kResourceFlavor, "a100"));
  EXPECT_TRUE(Stored("ResourceFlavor", "a100"));
  EXPECT_NE(StoredMark("ResourceFlavor", "a100").find("\"by\":\"alice\""), std::string::npos);
  // A second delete changes nothing.
  ASSERT_TRUE(Delete("ResourceFlavor", "a100", kT0 + 900, "bob").ok());
  EXPECT_EQ(controller_->queues().DeletionOf(kueue::Kind::kResourceFlavor, "", "a100")->by,
            "alice");

  // Applied again while Terminating: updated, still Terminating, and told so.
  auto again = controller_->Apply(
      "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\nmetadata: {name: a100}\n"
      "spec: {nodeLabels: {gpu: a100}}\n",
      "a100.yaml", kT0 + 200);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  ASSERT_EQ(again->configured_size(), 1);
  bool warned = false;
  for (const auto& w : again->warnings()) {
    warned |= w.find("ResourceFlavor/a100: is Terminating") != std::string::npos;
  }
  EXPECT_TRUE(warned);
  EXPECT_TRUE(controller_->queues().Terminating(kueue::Kind::kResourceFlavor, "a100"));

  // research stops naming it; first still holds it.
  ApplyOk(kResearchWithoutA100, kT0 + 300);
  controller_->Schedule(kT0 + 400);
  EXPECT_EQ(Get("ResourceFlavor", "a100").in_use_by_size(), 1);
  EXPECT_EQ(Get("ResourceFlavor", "a100").in_use_by(0), "TrainJob first");

  // A restart keeps it Terminating, with when and by whom.
  MakeController();
  controller_->Schedule(kT0 + 500);
  ASSERT_NE(controller_->queues().FindFlavor("a100"), nullptr);
  const QueueCatalog::Deletion* mark =
      controller_->queues().DeletionOf(kueue::Kind::kResourceFlavor, "", "a100");
  ASSERT_NE(mark, nullptr);
  EXPECT_EQ(mark->unix_ms, kT0 + 100);
  EXPECT_EQ(mark->by, "alice");
  EXPECT_EQ(Get("ResourceFlavor", "a100").deletion_timestamp(), "2023-11-14T22:13:20Z");
  EXPECT_TRUE(Get("ResourceFlavor", "h100").deletion_timestamp().empty());

  // first finishes: a100 goes at the next pass, object and mark, without another command.
  ReportAll("first", v1::WorkerEvent::KIND_STARTED, kT0 + 600);
  ReportAll("first", v1::WorkerEvent::KIND_EXITED, kT0 + 700);
  ASSERT_EQ(PhaseName(JobOrDie("first")), "Succeeded");
  controller_->Schedule(kT0 + 800);
  EXPECT_EQ(controller_->queues().FindFlavor("a100"), nullptr);
  EXPECT_FALSE(Stored("ResourceFlavor", "a100"));
  EXPECT_EQ(StoredMark("ResourceFlavor", "a100"), "");
  MakeController();
  EXPECT_EQ(controller_->queues().FindFlavor("a100"), nullptr);
  EXPECT_NE(controller_->queues().FindFlavor("h100"), nullptr);
}

TEST_P(QueueDeletionTest, AClusterQueueInUseAdmitsNothingNewAndGoesWhenItsJobsAreDone) {
  ApplyOk(kQueues);
  ApplyOk(Job("first"));
  controller_->Schedule(kT0);
  ASSERT_TRUE(JobOrDie("first").has_admission());

  auto deleted = Delete("ClusterQueue", "research", kT0 + 100, "bob");
  ASSERT_TRUE(deleted.ok()) << deleted.status().ToString();
  EXPECT_EQ(deleted->objects(0).deletion_timestamp(), "2023-11-14T22:13:20Z");
  ASSERT_EQ(deleted->objects(0).in_use_by_size(), 1);
  EXPECT_EQ(deleted->objects(0).in_use_by(0), "TrainJob first");
  EXPECT_TRUE(Stored("ClusterQueue", "research"));
  EXPECT_NE(StoredMark("ClusterQueue", "research"), "");

  // A job that comes now waits, and says why; quota is free (h100), but nothing is admitted.
  ApplyOk(Job("second"), kT0 + 200);
  controller_->Schedule(kT0 + 2000);
  {
    const v1::JobStatus& second = JobOrDie("second");
    EXPECT_FALSE(second.has_admission());
    ASSERT_TRUE(second.has_queue_wait());
    EXPECT_EQ(second.queue_wait().kind(), "ClusterQueueTerminating");
    EXPECT_EQ(second.queue_wait().message(),
              "ClusterQueue research is terminating: it admits no new job");
  }

  // Restarted while Terminating: still Terminating, still admitting nothing.
  MakeController();
  controller_->Schedule(kT0 + 4000);
  EXPECT_TRUE(controller_->queues().Terminating(kueue::Kind::kClusterQueue, "research"));
  EXPECT_EQ(JobOrDie("second").queue_wait().kind(), "ClusterQueueTerminating");
  EXPECT_FALSE(JobOrDie("second").has_admission());
  EXPECT_TRUE(JobOrDie("first").has_admission());

  // first ends: research goes at the next pass; its flavors were never deleted and stay.
  ReportAll("first", v1::WorkerEvent::KIND_STARTED, kT0 + 4100);
  ReportAll("first", v1::WorkerEvent::KIND_EXITED, kT0 + 4200);
  controller_->Schedule(kT0 + 4300);
  EXPECT_EQ(controller_->queues().FindClusterQueue("research"), nullptr);
  EXPECT_FALSE(Stored("ClusterQueue", "research"));
  EXPECT_EQ(StoredMark("ClusterQueue", "research"), "");
  EXPECT_NE(controller_->queues().FindFlavor("a100"), nullptr);
  controller_->Schedule(kT0 + 6000);
  EXPECT_EQ(JobOrDie("second").queue_wait().kind(), "NoClusterQueue");
  EXPECT_EQ(JobOrDie("second").queue_wait().message(), "ClusterQueue research not found");
}

// A flavor and the ClusterQueue that names it, both deleted while a job runs: the ClusterQueue
// goes when the job is deleted and its ranks are gone, and the flavor with it, in one pass.
TEST_P(QueueDeletionTest, AFlavorKeptOnlyByATerminatingClusterQueueGoesWithIt) {
  ApplyOk(kQueues);
  ApplyOk(Job("first"));
  controller_->Schedule(kT0);
  ReportAll("first", v1::WorkerEvent::KIND_STARTED, kT0 + 10);
  ASSERT_TRUE(Delete("ResourceFlavor", "h100", kT0 + 100).ok());  // named by research only
  ASSERT_TRUE(Delete("ClusterQueue", "research", kT0 + 100).ok());
  EXPECT_EQ(Get("ResourceFlavor", "h100").in_use_by(0), "ClusterQueue research");
  controller_->Schedule(kT0 + 200);
  EXPECT_TRUE(controller_->queues().Terminating(kueue::Kind::kResourceFlavor, "h100"));

  ASSERT_TRUE(controller_->Delete("first", kT0 + 300, "alice").ok());
  controller_->Schedule(kT0 + 400);  // its ranks still run: all stays
  EXPECT_NE(controller_->queues().FindClusterQueue("research"), nullptr);
  ReportAll("first", v1::WorkerEvent::KIND_EXITED, kT0 + 500, 0, 15);
  controller_->Schedule(kT0 + 600);
  EXPECT_EQ(controller_->Find("first"), nullptr);
  EXPECT_EQ(controller_->queues().FindClusterQueue("research"), nullptr);
  EXPECT_EQ(controller_->queues().FindFlavor("h100"), nullptr);
  EXPECT_NE(controller_->queues().FindFlavor("a100"), nullptr);  // never deleted
  EXPECT_EQ(controller_->queues().terminating_count(), 0u);
}

// Nothing half-stored: with the store down (etcd's one member killed), a delete of a flavor in
// use and of an unused one both fail, and memory is as before (no Terminating mark, both still
// there); with the member back, the same delete marks it. SQLite cannot be made to fail here.
TEST_P(QueueDeletionTest, ADeleteTheStoreRefusesChangesNothing) {
  if (GetParam() != "etcd") GTEST_SKIP() << "the store failure is a killed etcd member";
  ApplyOk(kQueues);
  ApplyOk(Job("first"));
  controller_->Schedule(kT0);
  ASSERT_TRUE(JobOrDie("first").has_admission());

  etcd_->Kill(0);
  EXPECT_FALSE(Delete("ResourceFlavor", "a100", kT0 + 100).ok());
  EXPECT_FALSE(Delete("ResourceFlavor", "spare", kT0 + 100).ok());
  EXPECT_NE(controller_->queues().FindFlavor("a100"), nullptr);
  EXPECT_NE(controller_->queues().FindFlavor("spare"), nullptr);
  EXPECT_FALSE(controller_->queues().Terminating(kueue::Kind::kResourceFlavor, "a100"));
  EXPECT_EQ(controller_->queues().terminating_count(), 0u);

  ASSERT_TRUE(etcd_->Restart(0));
  ASSERT_TRUE(etcd_->WaitServing(0, 20000)) << etcd_->LogTail(0);
  EXPECT_EQ(StoredMark("ResourceFlavor", "a100"), "");
  EXPECT_TRUE(Stored("ResourceFlavor", "spare"));
  auto deleted = Delete("ResourceFlavor", "a100", kT0 + 200);
  ASSERT_TRUE(deleted.ok()) << deleted.status().ToString();
  EXPECT_TRUE(controller_->queues().Terminating(kueue::Kind::kResourceFlavor, "a100"));
  EXPECT_NE(StoredMark("ResourceFlavor", "a100"), "");
}

// A suspended job whose node then went silent keeps its quota through the lost node's hold (its
// old ranks may still run there, in their warning and stop graces): its ClusterQueue, deleted
// meanwhile, stays Terminating until the hold ends, across a restart (before, the delete went
// through at once, and the hold itself was forgotten by a restart).
TEST_P(QueueDeletionTest, AClusterQueueStaysWhileALostNodesHoldKeepsItsQuota) {
  ApplyOk(kQueues);
  ApplyOk(Job("first"));
  controller_->Schedule(kT0);
  ReportAll("first", v1::WorkerEvent::KIND_STARTED, kT0 + 10);
  ASSERT_TRUE(controller_->SetSuspend("first", true, kT0 + 20).ok());
  const int64_t hold = kT0 + 5000;  // last heard + partition grace + stop grace + margin
  controller_->OnNodeLost(JobOrDie("first").ranks(0).node(), kT0 + 30, hold);
  const int64_t until = hold + kDefaultPreemptionGraceSeconds * 1000;
  controller_->Schedule(kT0 + 40);
  ASSERT_TRUE(JobOrDie("first").has_admission());

  auto deleted = Delete("ClusterQueue", "research", kT0 + 50);
  ASSERT_TRUE(deleted.ok()) << deleted.status().ToString();
  ASSERT_EQ(deleted->objects_size(), 1);
  EXPECT_EQ(std::vector<std::string>(deleted->objects(0).in_use_by().begin(),
                                     deleted->objects(0).in_use_by().end()),
            std::vector<std::string>{"TrainJob first"});
  ASSERT_TRUE(controller_->Flush().ok());
  MakeController();  // a restart in the hold
  controller_->Schedule(until - 1);
  EXPECT_TRUE(controller_->queues().Terminating(kueue::Kind::kClusterQueue, "research"));
  EXPECT_TRUE(JobOrDie("first").has_admission());
  controller_->Schedule(until + 1);
  controller_->Schedule(until + 2);
  EXPECT_FALSE(JobOrDie("first").has_admission());
  EXPECT_EQ(controller_->queues().FindClusterQueue("research"), nullptr);
  EXPECT_FALSE(Stored("ClusterQueue", "research"));
}

}  // namespace
}  // namespace trainlet::coordinator
