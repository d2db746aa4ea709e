// trainletctl's queue kinds (cli/trainletctl/queue_commands): the resource names it takes and the
// tables `get` prints.
#include "trainletctl/queue_commands.h"

#include <gtest/gtest.h>

namespace trainlet::cli {
namespace {

TEST(QueueCommandsTest, ResourceNamesAndShortNames) {
  std::string name;
  EXPECT_EQ(QueueKindOf("clusterqueues", name), "ClusterQueue");
  EXPECT_EQ(QueueKindOf("cq", name), "ClusterQueue");
  EXPECT_EQ(QueueKindOf("ClusterQueue", name), "ClusterQueue");
  EXPECT_EQ(QueueKindOf("clusterqueue.kueue.x-k8s.io", name), "ClusterQueue");
  EXPECT_EQ(QueueKindOf("lq", name), "LocalQueue");
  EXPECT_EQ(QueueKindOf("localqueues", name), "LocalQueue");
  EXPECT_EQ(QueueKindOf("rf", name), "ResourceFlavor");
  EXPECT_EQ(QueueKindOf("resourceflavors", name), "ResourceFlavor");
  EXPECT_EQ(QueueKindOf("wpc", name), "WorkloadPriorityClass");
  EXPECT_EQ(QueueKindOf("workloadpriorityclasses", name), "WorkloadPriorityClass");
  EXPECT_EQ(QueueKindOf("trainjobs", name), "");
  EXPECT_EQ(QueueKindOf("nodes", name), "");
  EXPECT_TRUE(name.empty());
  EXPECT_EQ(QueueKindOf("cq/team-a", name), "ClusterQueue");
  EXPECT_EQ(name, "team-a");
}

TEST(QueueCommandsTest, Tables) {
  v1::QueueObjectList cqs;
  auto* a = cqs.add_objects();
  a->set_name("team-a");
  a->set_cohort("research");
  a->set_queueing_strategy("StrictFIFO");
  auto* b = cqs.add_objects();
  b->set_name("solo");
  b->set_queueing_strategy("BestEffortFIFO");
  // What admission counts: 1500m of 1 cpu used (500m borrowed), 2 admitted, 3 waiting.
  a->mutable_usage()->set_pending(3);
  a->mutable_usage()->set_admitted(2);
  auto* cpu = a->mutable_usage()->add_flavors();
  cpu->set_flavor("default-flavor");
  cpu->set_resource("cpu");
  cpu->set_nominal(1000);
  cpu->set_used(1500);
  cpu->set_borrowed(500);
  EXPECT_EQ(RenderQueueObjects(cqs, "ClusterQueue", OutputFormat::kTable),
            "NAME     COHORT     STRATEGY         PENDING   ADMITTED   USAGE (used/nominal)\n"
            "team-a   research   StrictFIFO       3         2          cpu 1500m/1 (+500m)\n"
            "solo     <none>     BestEffortFIFO   0         0          <none>\n");
  EXPECT_EQ(QueueQuantity("memory", int64_t{4} << 30), "4Gi");
  EXPECT_EQ(QueueQuantity("nvidia.com/gpu", 8), "8");
  EXPECT_EQ(RenderQueueObjects(cqs, "ClusterQueue", OutputFormat::kName),
            "clusterqueue/team-a\nclusterqueue/solo\n");

  v1::QueueObjectList lqs;
  auto* q = lqs.add_objects();
  q->set_namespace_("team-a");
  q->set_name("user-queue");
  q->set_cluster_queue("team-a");
  q->mutable_usage()->set_pending(1);
  EXPECT_EQ(RenderQueueObjects(lqs, "LocalQueue", OutputFormat::kTable),
            "NAMESPACE   NAME         CLUSTERQUEUE   PENDING   ADMITTED\n"
            "team-a      user-queue   team-a         1         0\n");

  v1::QueueObjectList rfs;
  auto* f = rfs.add_objects();
  f->set_name("h100");
  (*f->mutable_node_labels())["zone"] = "b";
  (*f->mutable_node_labels())["gpu"] = "h100";
  auto* d = rfs.add_objects();
  d->set_name("default-flavor");
  EXPECT_EQ(RenderQueueObjects(rfs, "ResourceFlavor", OutputFormat::kTable),
            "NAME             NODELABELS\n"
            "h100             gpu=h100,zone=b\n"
            "default-flavor   <none>\n");

  v1::QueueObjectList wpcs;
  auto* p = wpcs.add_objects();
  p->set_name("high");
  p->set_value(1000);
  EXPECT_EQ(RenderQueueObjects(wpcs, "WorkloadPriorityClass", OutputFormat::kTable),
            "NAME   VALUE\nhigh   1000\n");
  // -o json carries the document.
  p->set_yaml("value: 1000\n");
  EXPECT_NE(RenderQueueObjects(wpcs, "WorkloadPriorityClass", OutputFormat::kJson)
                .find("\"yaml\": \"value: 1000\\n\""),
            std::string::npos)
      << RenderQueueObjects(wpcs, "WorkloadPriorityClass", OutputFormat::kJson);
}

// A flavor deleted while in use (Kueue's resource-in-use finalizer) is Terminating: the table
// gains a STATUS column, describe says since when and what uses it, -o json has the fields.
TEST(QueueCommandsTest, TerminatingObjects) {
  v1::QueueObjectList rfs;
  auto* a = rfs.add_objects();
  a->set_name("a100");
  (*a->mutable_node_labels())["gpu"] = "a100";
  a->add_finalizers("kueue.x-k8s.io/resource-in-use");
  a->set_deletion_timestamp("2026-11-25T13:39:47Z");
  a->add_in_use_by("ClusterQueue research");
  a->add_in_use_by("TrainJob team-a/llm-7");
  auto* h = rfs.add_objects();
  h->set_name("h100");
  h->add_finalizers("kueue.x-k8s.io/resource-in-use");
  EXPECT_EQ(RenderQueueObjects(rfs, "ResourceFlavor", OutputFormat::kTable),
            "NAME   NODELABELS   STATUS\n"
            "a100   gpu=a100     Terminating\n"
            "h100   <none>       Active\n");
  EXPECT_EQ(DescribeResourceFlavor(*a),
            "Name:          a100\n"
            "Node labels:   gpu=a100\n"
            "Status:        Terminating since 2026-11-25T13:39:47Z (deleted while in use; removed "
            "once unused)\n"
            "In use by:     ClusterQueue research, TrainJob team-a/llm-7\n");
  EXPECT_EQ(DescribeResourceFlavor(*h), "Name:          h100\nNode labels:   <none>\n");
  const std::string json = RenderQueueObjects(rfs, "ResourceFlavor", OutputFormat::kJson);
  EXPECT_NE(json.find("\"deletionTimestamp\": \"2026-11-25T13:39:47Z\""), std::string::npos)
      << json;
  EXPECT_NE(json.find("\"kueue.x-k8s.io/resource-in-use\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"inUseBy\""), std::string::npos) << json;

  v1::QueueObjectList cqs;
  auto* q = cqs.add_objects();
  q->set_name("research");
  q->set_queueing_strategy("BestEffortFIFO");
  q->set_deletion_timestamp("2026-11-25T13:39:47Z");
  q->add_in_use_by("TrainJob first");
  EXPECT_NE(DescribeClusterQueue(*q).find("Status:        Terminating since 2026-11-25T13:39:47Z"),
            std::string::npos)
      << DescribeClusterQueue(*q);
  EXPECT_NE(RenderQueueObjects(cqs, "ClusterQueue", OutputFormat::kTable).find("Terminating"),
            std::string::npos);
}

}  // namespace
}  // namespace trainlet::cli
