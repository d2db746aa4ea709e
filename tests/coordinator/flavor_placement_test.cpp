// A job admitted to a ResourceFlavor is placed only on that flavor's nodes, through a real
// JobController and SQLite store (coordinator/flavor_constraint.h, gang_planner.h): Kueue injects
// the flavor's nodeLabels into the pod's nodeSelector, trainlet narrows the gang's nodes to them.
// The flavor is stored with the admission, so a restarted controller keeps the job on them; a
// flavor none of whose nodes is there says so in the job's reason.
#include <gtest/gtest.h>

#include <string>

#include "controller_fixture.h"

namespace trainlet::coordinator {
namespace {

// ClusterQueue research: cpu from flavor a100 (2 cpu) first, then h100 (1 cpu); ClusterQueue
// tpus: cpu from flavor tpu, whose nodes nobody registered.
constexpr const char* kQueues = R"(
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: a100}
spec: {nodeLabels: {gpu: a100}}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: h100}
spec: {nodeLabels: {gpu: h100}}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: tpu}
spec: {nodeLabels: {accel: tpu}}
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
      - {name: cpu, nominalQuota: 2}
    - name: h100
      resources:
      - {name: cpu, nominalQuota: 1}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: tpus}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: tpu
      resources:
      - {name: cpu, nominalQuota: 4}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {namespace: default, name: lq}
spec: {clusterQueue: research}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {namespace: default, name: tpu-q}
spec: {clusterQueue: tpus}
)";

std::string Job(const std::string& name, const std::string& queue = "lq") {
  return "apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata:\n  name: " + name +
         "\n  labels:\n    kueue.x-k8s.io/queue-name: " + queue +
         "\nspec:\n  runtimeRef: {name: plain}\n"
         "  trainer:\n    numNodes: 1\n    resourcesPerNode: {requests: {cpu: \"1\"}}\n"
         "    command: [\"true\"]\n";
}

class FlavorPlacementTest : public testing::ControllerFixture {
 protected:
  void SetUp() override {
    testing::ControllerFixture::SetUp();
    // node-a is an h100 node, node-b an a100 one, one slot each. Without the flavor's labels, a
    // job would take node-a first (equal fit, ties broken by name).
    AddCpuNode("node-a", "h100");
    AddCpuNode("node-b", "a100");
  }
  void AddCpuNode(const std::string& name, const std::string& gpu) {
    v1::NodeInfo info;
    info.set_name(name);
    info.set_address("127.0.1." + std::to_string(registry_.nodes().size() + 1));
    info.set_hostname(name);
    info.set_slots(1);
    (*info.mutable_allocatable())["cpu"] = 8;
    (*info.mutable_labels())["gpu"] = gpu;
    ASSERT_TRUE(registry_.Register(info, "rid-" + name, "key-" + name, Clock::now(), kT0).ok());
  }
  static std::string Placed(const v1::JobStatus& st) {
    return st.placement().empty() ? "" : st.placement(0);
  }
};

TEST_F(FlavorPlacementTest, AJobChargedToAFlavorRunsOnlyOnItsNodes) {
  ApplyOk(kQueues);
  ApplyOk(Job("first"));
  controller_->Schedule(kT0);
  const v1::JobStatus& first = JobOrDie("first");
  ASSERT_TRUE(first.has_admission());
  EXPECT_EQ(first.admission().resources(0).flavor(), "a100");
  EXPECT_EQ(Placed(first), "node-b");  // the a100 node, not node-a
  bool admitted_event = false;
  for (const auto& e : first.events()) {
    admitted_event |= e.reason() == "Admitted" &&
                      e.message().find("(flavor a100 (nodeLabels gpu=a100))") != std::string::npos;
  }
  EXPECT_TRUE(admitted_event);

  // second: a100 still has quota, but its one node is busy. node-a is free and not its: it waits,
  // and its reason names the flavor and the labels.
  ApplyOk(Job("second"), kT0 + 10);
  controller_->Schedule(kT0 + 2000);
  {
    const v1::JobStatus& second = JobOrDie("second");
    ASSERT_TRUE(second.has_admission());
    EXPECT_EQ(second.admission().resources(0).flavor(), "a100");
    EXPECT_EQ(PhaseName(second), "Pending");
    EXPECT_TRUE(second.placement().empty());
    EXPECT_EQ(second.reason(), "Unschedulable");
    EXPECT_NE(second.message().find("1 of them matches ResourceFlavor a100's nodeLabels gpu=a100, "
                                    "0 of them have 1 free slot"),
              std::string::npos)
        << second.message();
  }

  // third: a100's quota is used, so it is charged to h100, and runs on node-a.
  ApplyOk(Job("third"), kT0 + 2100);
  controller_->Schedule(kT0 + 3000);
  {
    const v1::JobStatus& third = JobOrDie("third");
    ASSERT_TRUE(third.has_admission());
    EXPECT_EQ(third.admission().resources(0).flavor(), "h100");
    EXPECT_EQ(Placed(third), "node-a");
  }

  // The flavor is stored with the admission: a restarted controller keeps second on a100's node.
  ReportAll("third", v1::WorkerEvent::KIND_STARTED, kT0 + 3100);
  ReportAll("third", v1::WorkerEvent::KIND_EXITED, kT0 + 3200);  // node-a is free again
  MakeController();
  controller_->Schedule(kT0 + 4000);
  EXPECT_TRUE(JobOrDie("second").placement().empty());
  EXPECT_EQ(JobOrDie("second").admission().resources(0).flavor(), "a100");
  ReportAll("first", v1::WorkerEvent::KIND_STARTED, kT0 + 4100);
  ReportAll("first", v1::WorkerEvent::KIND_EXITED, kT0 + 4200);
  controller_->Schedule(kT0 + 6000);
  EXPECT_EQ(Placed(JobOrDie("second")), "node-b");
}

TEST_F(FlavorPlacementTest, AFlavorWithNoNodesSaysSoInsteadOfWaitingSilently) {
  ApplyOk(kQueues);
  ApplyOk(Job("tpu-job", "tpu-q"));
  controller_->Schedule(kT0);
  const v1::JobStatus& st = JobOrDie("tpu-job");
  ASSERT_TRUE(st.has_admission());
  EXPECT_EQ(PhaseName(st), "Pending");
  EXPECT_TRUE(st.placement().empty());
  EXPECT_EQ(st.reason(), "Unschedulable");
  EXPECT_NE(st.message().find("0 of them match ResourceFlavor tpu's nodeLabels accel=tpu"),
            std::string::npos)
      << st.message();
  EXPECT_NE(st.message().find("it waits for a node with those labels"), std::string::npos);

  // The flavor's labels changed to ones node-b has: tried again at once, and placed there.
  ApplyOk(
      "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\nmetadata: {name: tpu}\n"
      "spec: {nodeLabels: {gpu: a100}}\n",
      kT0 + 100);
  controller_->Schedule(kT0 + 2000);
  EXPECT_EQ(Placed(JobOrDie("tpu-job")), "node-b");
}

}  // namespace
}  // namespace trainlet::coordinator
