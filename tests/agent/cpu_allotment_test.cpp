// CpuAllotment: concurrent attempts on one node get disjoint CPUs while the node has free ones,
// share (naming with whom) when it has not, and give them back when they end; a restarted agent
// rebuilds the table from its steps' records.
#include "agent/cpu_allotment.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "agent/rank_binding.h"

namespace trainlet::agent {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

// A CPU-only node: one NUMA node holding `cpus` PUs, `slots` slots.
v1::NodeInfo CpuNode(unsigned cpus, uint32_t slots) {
  v1::NodeInfo node;
  node.set_slots(slots);
  auto* numa = node.mutable_topology()->add_numa_nodes();
  numa->set_os_index(0);
  numa->set_cpuset(cpus == 1 ? "0" : "0-" + std::to_string(cpus - 1));
  return node;
}

v1::LaunchPlan Plan(const std::string& job, uint32_t attempt, uint32_t ranks, uint32_t slots) {
  v1::LaunchPlan plan;
  plan.set_job(job);
  plan.set_attempt(attempt);
  plan.set_slots(slots);
  for (uint32_t r = 0; r < ranks; ++r) {
    auto* w = plan.add_workers();
    w->set_rank(r);
    w->set_local_rank(r);
  }
  return plan;
}

TEST(CpuAllotmentTest, TwoOneRankJobsOnATwoCpuNodeGetDisjointCpus) {
  const v1::NodeInfo node = CpuNode(2, 2);
  CpuAllotment allotment(TopologyCpus(node.topology()));
  const CpuGrant a = GrantForPlan(allotment, Plan("a", 1, 1, 1), node);
  const CpuGrant b = GrantForPlan(allotment, Plan("b", 1, 1, 1), node);
  EXPECT_THAT(a.cpus, ElementsAre(0u));
  EXPECT_THAT(b.cpus, ElementsAre(1u));
  EXPECT_THAT(a.shared_with, IsEmpty());
  EXPECT_THAT(b.shared_with, IsEmpty());
  EXPECT_EQ(b.SharedNote("node-1"), "");
  // Each job's rank is bound inside its own grant.
  const auto ranks_b = BindingsForPlan(Plan("b", 1, 1, 1), node, &b.cpus);
  ASSERT_EQ(ranks_b.size(), 1u);
  EXPECT_EQ(ranks_b[0].CpuList(), "1");
}

TEST(CpuAllotmentTest, MoreJobsThanCpusShareAndSaySo) {
  const v1::NodeInfo node = CpuNode(2, 4);  // 4 slots on 2 CPUs: a 1-slot job gets 1 CPU
  CpuAllotment allotment(TopologyCpus(node.topology()));
  GrantForPlan(allotment, Plan("a", 1, 1, 1), node);
  GrantForPlan(allotment, Plan("b", 1, 1, 1), node);
  const CpuGrant c = GrantForPlan(allotment, Plan("c", 1, 1, 1), node);
  EXPECT_THAT(c.cpus, ElementsAre(0u));  // the least-held CPU, lowest first
  EXPECT_THAT(c.shared_with, ElementsAre("a"));
  EXPECT_EQ(c.SharedNote("node-1"),
            "CPUs 0 of node node-1 shared with trainjob/a (no free CPUs left)");
  // a now shares with c too.
  EXPECT_THAT(allotment.Held({"a", 1}).shared_with, ElementsAre("c"));
}

// What the coordinator hears (issue 19, defect 11): the attempt that must share, and each one it
// shares with, from every node, whether or not ranks of its plan start there (an MPI job's other
// nodes get a plan without workers).
TEST(CpuAllotmentTest, SharedCpuEventsNameBothSidesOnNodesWithoutRanks) {
  const v1::NodeInfo node = CpuNode(2, 4);
  CpuAllotment allotment(TopologyCpus(node.topology()));
  GrantForPlan(allotment, Plan("a", 1, 1, 1), node);
  EXPECT_THAT(SharedCpuEvents(allotment, {"a", 1}, "node-2", 7), IsEmpty());
  GrantForPlan(allotment, Plan("b", 1, 1, 1), node);
  EXPECT_THAT(SharedCpuEvents(allotment, {"b", 1}, "node-2", 7), IsEmpty());  // free CPUs left
  GrantForPlan(allotment, Plan("mpi", 3, /*ranks=*/0, 1), node);
  const auto events = SharedCpuEvents(allotment, {"mpi", 3}, "node-2", 7);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].job(), "mpi");
  EXPECT_EQ(events[0].attempt(), 3u);
  EXPECT_EQ(events[0].node(), "node-2");
  EXPECT_EQ(events[0].unix_ms(), 7);
  EXPECT_EQ(events[0].kind(), v1::WorkerEvent::KIND_UNSPECIFIED);
  EXPECT_EQ(events[0].cpus_shared(),
            "attempt 3: CPUs 0 of node node-2 shared with trainjob/a (no free CPUs left)");
  EXPECT_EQ(events[1].job(), "a");
  EXPECT_EQ(events[1].attempt(), 1u);
  EXPECT_EQ(events[1].cpus_shared(),
            "attempt 1: CPUs 0 of node node-2 shared with trainjob/mpi (no free CPUs left)");
  EXPECT_THAT(allotment.SharingWith({"mpi", 3}), ElementsAre(CpuAllotment::Key{"a", 1}));
}

TEST(CpuAllotmentTest, ReleasedCpusGoToTheNextJob) {
  const v1::NodeInfo node = CpuNode(2, 2);
  CpuAllotment allotment(TopologyCpus(node.topology()));
  GrantForPlan(allotment, Plan("a", 1, 1, 1), node);
  GrantForPlan(allotment, Plan("b", 1, 1, 1), node);
  allotment.Release({"a", 1});
  const CpuGrant c = GrantForPlan(allotment, Plan("c", 1, 1, 1), node);
  EXPECT_THAT(c.cpus, ElementsAre(0u));
  EXPECT_THAT(c.shared_with, IsEmpty());
  // A newer attempt of b gives back the older one's CPUs first, and takes them again.
  const CpuGrant b2 = GrantForPlan(allotment, Plan("b", 2, 1, 1), node);
  EXPECT_THAT(b2.cpus, ElementsAre(1u));
  EXPECT_FALSE(allotment.Holds({"b", 1}));
  EXPECT_EQ(allotment.size(), 2u);
}

TEST(CpuAllotmentTest, SimulatedNodesOnOneMachineStartAtDifferentCpus) {
  EXPECT_EQ(FirstCpuIndex("node-1", 2), 0u);
  EXPECT_EQ(FirstCpuIndex("node-2", 2), 1u);
  EXPECT_EQ(FirstCpuIndex("node-3", 2), 0u);
  EXPECT_EQ(FirstCpuIndex("gpu-a", 8), 0u);
  EXPECT_EQ(FirstCpuIndex("n0", 8), 0u);
  EXPECT_EQ(FirstCpuIndex("node-10", 4), 1u);
  EXPECT_EQ(FirstCpuIndex("node12345678901234", 8), 1u);  // its last 9 digits: 678901234
  // node-2 of a 4-CPU machine hands out CPU 1 first, then 2, 3, and wraps to 0.
  CpuAllotment allotment({0, 1, 2, 3}, FirstCpuIndex("node-2", 4));
  EXPECT_THAT(allotment.Take({"a", 1}, 2).cpus, ElementsAre(1u, 2u));
  EXPECT_THAT(allotment.Take({"b", 1}, 2).cpus, ElementsAre(0u, 3u));
}

TEST(CpuAllotmentTest, ShareFollowsSlots) {
  const v1::NodeInfo node = CpuNode(8, 4);  // 2 CPUs a slot
  CpuAllotment allotment(TopologyCpus(node.topology()));
  EXPECT_THAT(GrantForPlan(allotment, Plan("a", 1, 1, 2), node).cpus, ElementsAre(0u, 1u, 2u, 3u));
  // An MPI launcher's plan holds one worker but the job's slots on the node.
  EXPECT_THAT(GrantForPlan(allotment, Plan("b", 1, 1, 1), node).cpus, ElementsAre(4u, 5u));
  // Without slots (an older coordinator): the plan's local ranks.
  EXPECT_THAT(GrantForPlan(allotment, Plan("c", 1, 1, 0), node).cpus, ElementsAre(6u, 7u));
  // The same attempt's plan again keeps its grant.
  EXPECT_THAT(GrantForPlan(allotment, Plan("a", 1, 1, 2), node).cpus, ElementsAre(0u, 1u, 2u, 3u));
}

TEST(CpuAllotmentTest, AJobHoldingEverySlotGetsTheWholeNode) {
  const v1::NodeInfo node = CpuNode(4, 2);
  CpuAllotment allotment(TopologyCpus(node.topology()));
  EXPECT_THAT(GrantForPlan(allotment, Plan("a", 1, 2, 2), node).cpus, ElementsAre(0u, 1u, 2u, 3u));
}

TEST(CpuAllotmentTest, BindingNoneTakesNothing) {
  const v1::NodeInfo node = CpuNode(2, 2);
  CpuAllotment allotment(TopologyCpus(node.topology()));
  v1::LaunchPlan plan = Plan("a", 1, 1, 1);
  plan.set_binding("none");
  EXPECT_THAT(GrantForPlan(allotment, plan, node).cpus, IsEmpty());
  EXPECT_EQ(allotment.size(), 0u);
}

TEST(CpuAllotmentTest, RestoreRebuildsGrantsAndSharing) {
  CpuAllotment allotment({0, 1});
  allotment.Restore({"a", 1}, {1, 0});
  allotment.Restore({"b", 3}, {1});
  EXPECT_THAT(allotment.Held({"a", 1}).cpus, ElementsAre(0u, 1u));
  EXPECT_THAT(allotment.Held({"b", 3}).shared_with, ElementsAre("a"));
  // A restored grant is kept when the attempt's plan comes again.
  EXPECT_THAT(allotment.Take({"b", 3}, 2).cpus, ElementsAre(1u));
}

TEST(CpuAllotmentTest, NodesWithGpusKeepTheWholeNode) {
  v1::NodeInfo node = CpuNode(8, 8);
  auto* gpu = node.add_accelerators();
  gpu->set_vendor("nvidia");
  gpu->set_pci_bus_id("0000:01:00.0");
  EXPECT_EQ(CpuShare(node, 8, 1), 8u);
  EXPECT_EQ(CpuShare(CpuNode(8, 8), 8, 1), 1u);
}

TEST(CpuAllotmentTest, MoreSlotsThanCpusStillGiveACpuPerSlot) {
  // A local up cluster's default: 8 slots on 2 CPUs. A 4-rank job gets both CPUs, not 2*4/8 = 1.
  EXPECT_EQ(CpuShare(CpuNode(2, 8), 2, 4), 2u);
  EXPECT_EQ(CpuShare(CpuNode(2, 8), 2, 1), 1u);
  EXPECT_EQ(CpuShare(CpuNode(16, 8), 16, 2), 4u);  // fewer slots than CPUs: P*k/S as before
}

TEST(CpuAllotmentTest, RestrictTopologyCutsNumaNodes) {
  v1::Topology t;
  auto* n0 = t.add_numa_nodes();
  n0->set_cpuset("0-3");
  auto* n1 = t.add_numa_nodes();
  n1->set_os_index(1);
  n1->set_cpuset("4-7");
  const v1::Topology r = RestrictTopology(t, {2, 3, 4});
  EXPECT_EQ(r.numa_nodes(0).cpuset(), "2-3");
  EXPECT_EQ(r.numa_nodes(1).cpuset(), "4");
  EXPECT_THAT(TopologyCpus(t), ElementsAre(0u, 1u, 2u, 3u, 4u, 5u, 6u, 7u));
}

}  // namespace
}  // namespace trainlet::agent
