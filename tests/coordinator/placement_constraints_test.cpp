// The planner's resource accounting, node selectors, taints and tolerations, and the Pending
// reasons it gives when nothing fits.
#include <gtest/gtest.h>

#include "coordinator/gang_planner.h"
#include "coordinator/node_registry.h"

namespace trainlet::coordinator {
namespace {

using V = std::vector<std::string>;
using trainjob::Toleration;

NodeCapacity Gpu(std::string name, int64_t free_gpus, int64_t total_gpus = 8,
                 std::map<std::string, std::string> labels = {}) {
  NodeCapacity n{std::move(name), 64, 64, true, true, std::move(labels)};
  n.allocatable[ResourceKind::kCpu] = 64000;
  n.allocatable[ResourceKind::kMemory] = int64_t{512} << 30;
  n.allocatable[ResourceKind::kNvidiaGpu] = total_gpus;
  n.free_resources = n.allocatable;
  n.free_resources[ResourceKind::kNvidiaGpu] = free_gpus;
  return n;
}

NodeCapacity Cpu(std::string name, std::map<std::string, std::string> labels = {}) {
  return Gpu(std::move(name), 0, 0, std::move(labels));
}

V Names(const Result<Placement>& p) {
  return p.ok() ? p->nodes : V{"<error: " + p.status().ToString() + ">"};
}

GangRequest Gpus(uint32_t nodes, int64_t gpus) {
  GangRequest r{nodes, 1};
  r.resources[ResourceKind::kNvidiaGpu] = gpus;
  return r;
}

TEST(Selector, MatchesEveryPair) {
  std::map<std::string, std::string> labels = {{"node-type", "training"}, {"zone", "a"}};
  EXPECT_TRUE(MatchesSelector({}, labels, "n1"));
  EXPECT_TRUE(MatchesSelector({{"node-type", "training"}}, labels, "n1"));
  EXPECT_TRUE(MatchesSelector({{"node-type", "training"}, {"zone", "a"}}, labels, "n1"));
  EXPECT_FALSE(MatchesSelector({{"node-type", "training"}, {"zone", "b"}}, labels, "n1"));
  EXPECT_FALSE(MatchesSelector({{"gpu", "true"}}, labels, "n1"));
  EXPECT_FALSE(MatchesSelector({{"node-type", ""}}, labels, "n1"));
}

TEST(Selector, HostnameFallsBackToTheNodeName) {
  EXPECT_TRUE(MatchesSelector({{"kubernetes.io/hostname", "n1"}}, {}, "n1"));
  EXPECT_FALSE(MatchesSelector({{"kubernetes.io/hostname", "n2"}}, {}, "n1"));
  // An explicit label wins over the name.
  EXPECT_TRUE(
      MatchesSelector({{"kubernetes.io/hostname", "h"}}, {{"kubernetes.io/hostname", "h"}}, "n1"));
  EXPECT_FALSE(
      MatchesSelector({{"kubernetes.io/hostname", "n1"}}, {{"kubernetes.io/hostname", "h"}}, "n1"));
}

TEST(Tolerations, KubernetesMatchingRules) {
  const NodeTaint gpu{"gpu", "true", "NoSchedule"};
  EXPECT_FALSE(ToleratesTaint({}, gpu));
  EXPECT_TRUE(ToleratesTaint({{"gpu", "Equal", "true", "NoSchedule"}}, gpu));
  EXPECT_TRUE(ToleratesTaint({{"gpu", "", "true", ""}}, gpu));  // "" is Equal; any effect
  EXPECT_FALSE(ToleratesTaint({{"gpu", "Equal", "false", "NoSchedule"}}, gpu));
  EXPECT_FALSE(ToleratesTaint({{"gpu", "Equal", "true", "NoExecute"}}, gpu));
  EXPECT_TRUE(ToleratesTaint({{"gpu", "Exists", "", ""}}, gpu));
  EXPECT_TRUE(ToleratesTaint({{"", "Exists", "", ""}}, gpu));  // tolerates everything
  EXPECT_FALSE(ToleratesTaint({{"other", "Exists", "", ""}}, gpu));
  EXPECT_TRUE(ToleratesTaint({{"other", "Exists", "", ""}, {"gpu", "Exists", "", ""}}, gpu));
}

TEST(Tolerations, OnlyHardEffectsBlock) {
  const std::vector<NodeTaint> soft = {{"spot", "", "PreferNoSchedule"}};
  EXPECT_TRUE(ToleratesAll({}, soft));
  const std::vector<NodeTaint> hard = {{"spot", "", "PreferNoSchedule"},
                                       {"maint", "", "NoExecute"}};
  EXPECT_FALSE(ToleratesAll({}, hard));
  EXPECT_TRUE(ToleratesAll({{"maint", "Exists", "", "NoExecute"}}, hard));
  EXPECT_EQ(FormatTaint({"gpu", "true", "NoSchedule"}), "gpu=true:NoSchedule");
  EXPECT_EQ(FormatTaint({"maint", "", "NoExecute"}), "maint:NoExecute");
}

TEST(Placement, GpuRequestSkipsNodesWithoutEnoughFreeGpus) {
  std::vector<NodeCapacity> nodes = {Gpu("n1", 8), Gpu("n2", 4), Gpu("n3", 8), Cpu("c1")};
  EXPECT_EQ(Names(PlaceGang(Gpus(2, 8), nodes)), (V{"n1", "n3"}));
  EXPECT_EQ(Names(PlaceGang(Gpus(3, 4), nodes)), (V{"n1", "n2", "n3"}));
  auto p = PlaceGang(Gpus(3, 8), nodes);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), ErrorCode::kUnavailable);
  EXPECT_EQ(p.status().message(),
            "needs 3 nodes with 1 free slot, nvidia.com/gpu: 8 each; 4 of 4 nodes are Ready and "
            "schedulable, 4 of them have 1 free slot, 2 of them have nvidia.com/gpu: 8 free");
}

TEST(Placement, CpuAndMemoryAreCounted) {
  std::vector<NodeCapacity> nodes = {Cpu("c1"), Cpu("c2")};
  nodes[1].free_resources[ResourceKind::kMemory] = int64_t{8} << 30;
  GangRequest r{1, 1};
  r.resources[ResourceKind::kCpu] = 500;
  r.resources[ResourceKind::kMemory] = int64_t{16} << 30;
  EXPECT_EQ(Names(PlaceGang(r, nodes)), (V{"c1"}));
  r.num_nodes = 2;
  auto p = PlaceGang(r, nodes);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().message(),
            "needs 2 nodes with 1 free slot, cpu: 500m, memory: 16Gi each; 2 of 2 nodes are Ready "
            "and schedulable, 2 of them have 1 free slot, 2 of them have cpu: 500m free, 1 of them "
            "has memory: 16Gi free");
}

TEST(Placement, PacksGpuJobsOntoTheFullestGpuNodes) {
  // A 2-GPU job goes where 2 GPUs are left, keeping whole 8-GPU nodes free.
  std::vector<NodeCapacity> nodes = {Gpu("a", 8), Gpu("b", 2), Gpu("c", 8), Gpu("d", 3)};
  EXPECT_EQ(Names(PlaceGang(Gpus(1, 2), nodes)), (V{"b"}));
  EXPECT_EQ(Names(PlaceGang(Gpus(2, 2), nodes)), (V{"b", "d"}));
}

TEST(Placement, CpuJobsKeepOffGpuNodes) {
  std::vector<NodeCapacity> nodes = {Gpu("g1", 8), Gpu("g2", 8), Cpu("c1"), Cpu("c2")};
  nodes[0].free_slots = 1;  // fuller than the CPU nodes: best fit alone would pick it
  EXPECT_EQ(Names(PlaceGang({2, 1}, nodes)), (V{"c1", "c2"}));
  EXPECT_EQ(Names(PlaceGang({3, 1}, nodes)), (V{"c1", "c2", "g1"}));
}

TEST(Placement, NodeSelectorNarrowsAndTheReasonSaysSo) {
  std::map<std::string, std::string> training = {{"node-type", "training"}};
  std::vector<NodeCapacity> nodes = {Gpu("n1", 8, 8, training), Gpu("n2", 2, 8, training),
                                     Gpu("n3", 4, 8, training), Gpu("n4", 8)};
  GangRequest r = Gpus(2, 8);
  r.node_selector = training;
  auto p = PlaceGang(r, nodes);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().message(),
            "needs 2 nodes with 1 free slot, nvidia.com/gpu: 8 each; 4 of 4 nodes are Ready and "
            "schedulable, 3 of them match nodeSelector node-type=training, 3 of them have 1 free "
            "slot, 1 of them has nvidia.com/gpu: 8 free");
  r.num_nodes = 1;
  EXPECT_EQ(Names(PlaceGang(r, nodes)), (V{"n1"}));
  r.node_selector = {{"node-type", "inference"}};
  p = PlaceGang(r, nodes);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("0 of them match nodeSelector node-type=inference"),
            std::string::npos)
      << p.status().message();
}

TEST(Placement, TaintedNodesNeedATolerationAndTheReasonSaysSo) {
  std::vector<NodeCapacity> nodes = {Cpu("c1"), Cpu("c2"), Cpu("c3")};
  nodes[0].taints = {{"gpu", "true", "NoSchedule"}};
  nodes[1].taints = {{"dedicated", "infer", "NoExecute"}};
  nodes[2].taints = {{"spot", "", "PreferNoSchedule"}};
  EXPECT_EQ(Names(PlaceGang({1, 1}, nodes)), (V{"c3"}));
  auto p = PlaceGang({2, 1}, nodes);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().message(),
            "needs 2 nodes with 1 free slot each; 3 of 3 nodes are Ready and schedulable, 1 of "
            "them tolerates its taints, 1 of them has 1 free slot");
  GangRequest r{2, 1};
  r.tolerations = {Toleration{"gpu", "Equal", "true", "NoSchedule"}};
  EXPECT_EQ(Names(PlaceGang(r, nodes)), (V{"c1", "c3"}));
  r.num_nodes = 3;
  r.tolerations.push_back(Toleration{"dedicated", "Exists", "", ""});
  EXPECT_EQ(Names(PlaceGang(r, nodes)), (V{"c1", "c2", "c3"}));
}

TEST(Placement, UnhealthyNodesTakeNoRanks) {
  std::vector<NodeCapacity> nodes = {Cpu("c1"), Cpu("c2"), Cpu("c3")};
  nodes[1].healthy = false;
  EXPECT_EQ(Names(PlaceGang({2, 1}, nodes)), (V{"c1", "c3"}));
  auto p = PlaceGang({3, 1}, nodes);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().message(),
            "needs 3 nodes with 1 free slot each; 2 of 3 nodes are Ready and schedulable, 2 of "
            "them have 1 free slot; 1 Ready node is unhealthy");
}

TEST(Placement, ZonePackingHonoursResources) {
  // Zone a has three nodes but only two with 8 free GPUs; zone b has two: b holds the gang.
  std::vector<NodeCapacity> nodes = {
      Gpu("a1", 8, 8, {{"topology.kubernetes.io/zone", "a"}}),
      Gpu("a2", 8, 8, {{"topology.kubernetes.io/zone", "a"}}),
      Gpu("a3", 1, 8, {{"topology.kubernetes.io/zone", "a"}}),
      Gpu("b1", 8, 8, {{"topology.kubernetes.io/zone", "b"}}),
      Gpu("b2", 8, 8, {{"topology.kubernetes.io/zone", "b"}}),
      Gpu("b3", 8, 8, {{"topology.kubernetes.io/zone", "b"}}),
  };
  EXPECT_EQ(Names(PlaceGang(Gpus(3, 8), nodes)), (V{"b1", "b2", "b3"}));
  EXPECT_EQ(Names(PlaceGang(Gpus(2, 8), nodes)), (V{"a1", "a2"}));
}

}  // namespace
}  // namespace trainlet::coordinator

// Cordon and health live in the registry by node name.
namespace trainlet::coordinator {
namespace {

TEST(NodeRegistryPlacement, CordonSurvivesReRegistration) {
  NodeRegistry reg(std::chrono::milliseconds(100), std::chrono::milliseconds(300));
  v1::NodeInfo info;
  info.set_name("n1");
  const auto t0 = NodeRegistry::Clock::now();
  ASSERT_TRUE(reg.Register(info, "r1", "key-1", t0, 1).ok());
  auto changed = reg.SetSchedulable("n1", false, "DIMM swap");
  ASSERT_TRUE(changed.ok());
  EXPECT_TRUE(*changed);
  EXPECT_FALSE(*reg.SetSchedulable("n1", false, "again"));
  // The agent restarts and registers again, even after being Lost, with a new key.
  reg.Tick(t0 + std::chrono::seconds(1));
  EXPECT_EQ(reg.Find("n1")->state, NodeState::kLost);
  ASSERT_TRUE(reg.Register(info, "r2", "key-2", t0 + std::chrono::seconds(2), 2).ok());
  EXPECT_FALSE(reg.Find("n1")->schedulable);
  EXPECT_EQ(reg.Find("n1")->cordon_reason, "again");
  EXPECT_TRUE(*reg.SetSchedulable("n1", true, ""));
  EXPECT_TRUE(reg.Find("n1")->schedulable);
  EXPECT_EQ(reg.Find("n1")->cordon_reason, "");
  auto missing = reg.SetSchedulable("n9", false, "");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), ErrorCode::kNotFound);
}

TEST(NodeRegistryPlacement, HealthIsRecordedByName) {
  NodeRegistry reg(std::chrono::milliseconds(100), std::chrono::milliseconds(300));
  v1::NodeInfo info;
  info.set_name("n1");
  ASSERT_TRUE(reg.Register(info, "r1", "key-1", NodeRegistry::Clock::now(), 1).ok());
  EXPECT_TRUE(reg.Find("n1")->healthy);
  reg.SetHealth("n1", false, "disk full");
  EXPECT_FALSE(reg.Find("n1")->healthy);
  EXPECT_EQ(reg.Find("n1")->health_reason, "disk full");
  reg.SetHealth("n1", true, "ignored when healthy");
  EXPECT_TRUE(reg.Find("n1")->healthy);
  EXPECT_EQ(reg.Find("n1")->health_reason, "");
  reg.SetHealth("unknown", false, "x");  // a node never registered is ignored
  EXPECT_EQ(reg.Find("unknown"), nullptr);
}

}  // namespace
}  // namespace trainlet::coordinator
