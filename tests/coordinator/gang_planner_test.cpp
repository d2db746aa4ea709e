#include "coordinator/gang_planner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <random>

namespace trainlet::coordinator {
namespace {

NodeCapacity Node(std::string name, uint32_t free, uint32_t total = 8,
                  std::map<std::string, std::string> labels = {}) {
  return NodeCapacity{std::move(name), total, free, true, true, std::move(labels)};
}

std::vector<std::string> Names(const Result<Placement>& p) {
  return p.ok() ? p->nodes : std::vector<std::string>{"<error: " + p.status().ToString() + ">"};
}

using V = std::vector<std::string>;

TEST(GangPlanner, ExactFit) {
  std::vector<NodeCapacity> nodes = {Node("n1", 2), Node("n2", 2), Node("n3", 2)};
  EXPECT_EQ(Names(PlaceGang({3, 2}, nodes)), (V{"n1", "n2", "n3"}));
}

TEST(GangPlanner, NotEnoughNodesSaysWhatIsMissing) {
  std::vector<NodeCapacity> nodes = {Node("n1", 2), Node("n2", 2), Node("n3", 2)};
  auto p = PlaceGang({4, 2}, nodes);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), ErrorCode::kUnavailable);
  EXPECT_EQ(p.status().message(),
            "needs 4 nodes with 2 free slots each; 3 of 3 nodes are Ready and schedulable, 3 of "
            "them have 2 free slots");
}

TEST(GangPlanner, NotEnoughSlots) {
  std::vector<NodeCapacity> nodes = {Node("n1", 4), Node("n2", 3), Node("n3", 1)};
  auto p = PlaceGang({2, 4}, nodes);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), ErrorCode::kUnavailable);
  EXPECT_EQ(p.status().message(),
            "needs 2 nodes with 4 free slots each; 3 of 3 nodes are Ready and schedulable, 1 of "
            "them has 4 free slots");
  EXPECT_EQ(Names(PlaceGang({2, 3}, nodes)), (V{"n1", "n2"}));
}

// Nodes that could never hold the gang's ranks per node, even empty (a 4-ranks-per-node job on
// 2-slot agents), get the way out in the reason (issue 19); busy nodes that could do not.
TEST(GangPlanner, SlotsThatNeverSufficeSayHowToRaiseThem) {
  std::vector<NodeCapacity> small = {Node("n1", 2, 2), Node("n2", 2, 2)};
  auto p = PlaceGang({2, 4}, small);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().message(),
            "needs 2 nodes with 4 free slots each; 2 of 2 nodes are Ready and schedulable, 0 of "
            "them have 4 free slots; 0 of them have 4 slots in all, so it waits until nodes get "
            "more (trainlet-agent --slots 4, or trainletctl local up --slots 4)");
  std::vector<NodeCapacity> mixed = {Node("n1", 1, 8), Node("n2", 2, 2)};
  EXPECT_NE(PlaceGang({2, 4}, mixed).status().message().find("1 of them has 4 slots in all"),
            std::string::npos);
  std::vector<NodeCapacity> busy = {Node("n1", 1, 8), Node("n2", 0, 8)};
  EXPECT_EQ(PlaceGang({2, 4}, busy).status().message().find("in all"), std::string::npos);
}

TEST(GangPlanner, NotReadyAndUnschedulableAreSkipped) {
  std::vector<NodeCapacity> nodes = {Node("a", 4), Node("b", 4), Node("c", 4), Node("d", 4)};
  nodes[0].ready = false;        // Lost
  nodes[1].schedulable = false;  // cordoned
  EXPECT_EQ(Names(PlaceGang({2, 1}, nodes)), (V{"c", "d"}));
  auto p = PlaceGang({3, 1}, nodes);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().message(),
            "needs 3 nodes with 1 free slot each; 2 of 4 nodes are Ready and schedulable, 2 of "
            "them have 1 free slot; 1 Ready node is cordoned");
}

// A job admitted to a ResourceFlavor goes only to the flavor's nodes (Kueue injects its nodeLabels
// into the pod's nodeSelector), on top of the job's own nodeSelector.
TEST(GangPlanner, AFlavorsNodeLabelsKeepTheGangOnItsNodes) {
  std::vector<NodeCapacity> nodes = {Node("a1", 2, 8, {{"gpu", "a100"}}),
                                     Node("h1", 1, 8, {{"gpu", "h100"}}),
                                     Node("h2", 1, 8, {{"gpu", "h100"}, {"pool", "x"}})};
  GangRequest req{1, 1};
  EXPECT_EQ(Names(PlaceGang(req, nodes)), (V{"h1"}));  // best fit, with no flavor
  req.flavor = {"a100", {{"gpu", "a100"}}, {}};
  EXPECT_EQ(Names(PlaceGang(req, nodes)), (V{"a1"}));
  req.flavor = {"h100", {{"gpu", "h100"}}, {}};
  req.node_selector = {{"pool", "x"}};  // the job's own selector still applies
  EXPECT_EQ(Names(PlaceGang(req, nodes)), (V{"h2"}));
  req.num_nodes = 2;
  auto p = PlaceGang(req, nodes);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().message(),
            "needs 2 nodes with 1 free slot each; 3 of 3 nodes are Ready and schedulable, 1 of "
            "them matches nodeSelector pool=x, 1 of them matches ResourceFlavor h100's nodeLabels "
            "gpu=h100, 1 of them has 1 free slot");
}

// Nobody carries the flavor's labels: the reason names the flavor and its labels, and says how a
// node gets them, rather than waiting without a word.
TEST(GangPlanner, NoNodeOfTheFlavorSaysWhichFlavorAndLabels) {
  std::vector<NodeCapacity> nodes = {Node("h1", 4, 8, {{"gpu", "h100"}}),
                                     Node("h2", 4, 8, {{"gpu", "h100"}})};
  GangRequest req{1, 1};
  req.flavor = {"a100, fast-net", {{"gpu", "a100"}, {"net", "ib"}}, {}};
  auto p = PlaceGang(req, nodes);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), ErrorCode::kUnavailable);
  EXPECT_EQ(p.status().message(),
            "needs 1 node with 1 free slot each; 2 of 2 nodes are Ready and schedulable, 0 of "
            "them match ResourceFlavors a100, fast-net' nodeLabels gpu=a100,net=ib, 0 of them have "
            "1 free slot; it waits for a node with those labels (the agent's labels config key, "
            "or trainletctl local up --labels)");
}

// The flavor's tolerations are the pod's too: they let the gang onto nodes tainted for it.
TEST(GangPlanner, AFlavorsTolerationsTolerateItsNodesTaints) {
  NodeCapacity tainted = Node("spot1", 4, 8, {{"lifecycle", "spot"}});
  tainted.taints = {{"spot", "true", "NoSchedule"}};
  std::vector<NodeCapacity> nodes = {tainted, Node("n1", 4, 8)};
  GangRequest req{1, 1};
  req.flavor = {"spot", {{"lifecycle", "spot"}}, {}};
  auto p = PlaceGang(req, nodes);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("0 of them tolerate their taints"), std::string::npos)
      << p.status().message();
  req.flavor.tolerations = {{"spot", "Equal", "true", "NoSchedule"}};
  EXPECT_EQ(Names(PlaceGang(req, nodes)), (V{"spot1"}));
  req.flavor = {};  // the job's own toleration does the same
  req.tolerations = {{"spot", "Exists", "", ""}};
  req.node_selector = {{"lifecycle", "spot"}};
  EXPECT_EQ(Names(PlaceGang(req, nodes)), (V{"spot1"}));
}

TEST(GangPlanner, NoNodesAtAll) {
  auto p = PlaceGang({1, 1}, {});
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().message(), "needs 1 node with 1 free slot each; no nodes are registered");
}

TEST(GangPlanner, ZeroSizedRequestIsInvalid) {
  std::vector<NodeCapacity> nodes = {Node("n1", 2)};
  EXPECT_EQ(PlaceGang({0, 1}, nodes).status().code(), ErrorCode::kInvalid);
  EXPECT_EQ(PlaceGang({1, 0}, nodes).status().code(), ErrorCode::kInvalid);
}

TEST(GangPlanner, PacksTightlyLeavingBigNodesWhole) {
  // Best fit: the two nodes with 2 free slots are used, the empty 8-slot nodes stay whole.
  std::vector<NodeCapacity> nodes = {Node("big1", 8), Node("small1", 2), Node("big2", 8),
                                     Node("mid", 4), Node("small2", 2)};
  EXPECT_EQ(Names(PlaceGang({2, 2}, nodes)), (V{"small1", "small2"}));
  EXPECT_EQ(Names(PlaceGang({3, 2}, nodes)), (V{"mid", "small1", "small2"}));
  EXPECT_EQ(Names(PlaceGang({2, 5}, nodes)), (V{"big1", "big2"}));
}

TEST(GangPlanner, TiesBrokenByNameAndRanksInNaturalOrder) {
  std::vector<NodeCapacity> nodes;
  for (int i = 12; i >= 0; --i) nodes.push_back(Node("node-" + std::to_string(i), 4));
  EXPECT_EQ(Names(PlaceGang({3, 4}, nodes)), (V{"node-0", "node-1", "node-10"}));
  nodes.push_back(Node("node-99", 3));  // too small for 4, best fit for 3
  EXPECT_EQ(Names(PlaceGang({2, 3}, nodes)), (V{"node-0", "node-99"}));
}

TEST(GangPlanner, PrefersOneZoneWhenOneCanHoldTheGang) {
  const std::string z(kZoneLabel);
  std::vector<NodeCapacity> nodes = {
      Node("a1", 2, 8, {{z, "a"}}), Node("a2", 2, 8, {{z, "a"}}),  // tighter, but only 2 in a
      Node("b1", 6, 8, {{z, "b"}}), Node("b2", 6, 8, {{z, "b"}}),
      Node("b3", 6, 8, {{z, "b"}}), Node("c1", 2, 8, {{z, "c"}}),
  };
  EXPECT_EQ(Names(PlaceGang({3, 2}, nodes)), (V{"b1", "b2", "b3"}));
  // Two fit in a and b; a packs tighter.
  EXPECT_EQ(Names(PlaceGang({2, 2}, nodes)), (V{"a1", "a2"}));
  // No zone holds 4: fall back to best fit across zones.
  EXPECT_EQ(Names(PlaceGang({4, 2}, nodes)), (V{"a1", "a2", "b1", "c1"}));
}

TEST(GangPlanner, PrefersOneRackInsideTheChosenZone) {
  const std::string z(kZoneLabel), r(kRackLabel);
  std::vector<NodeCapacity> nodes = {
      Node("n1", 2, 8, {{z, "a"}, {r, "r1"}}), Node("n2", 2, 8, {{z, "a"}, {r, "r2"}}),
      Node("n3", 4, 8, {{z, "a"}, {r, "r3"}}), Node("n4", 4, 8, {{z, "a"}, {r, "r3"}}),
      Node("n5", 2, 8, {{z, "b"}, {r, "r1"}}),  // r1 would pack tighter, but spans zones
  };
  EXPECT_EQ(Names(PlaceGang({2, 2}, nodes)), (V{"n3", "n4"}));
  EXPECT_EQ(Names(PlaceGang({3, 2}, nodes)), (V{"n1", "n2", "n3"}));
}

TEST(GangPlanner, DeterministicWhateverTheInputOrder) {
  const std::string z(kZoneLabel);
  std::vector<NodeCapacity> nodes;
  for (int i = 0; i < 200; ++i) {
    nodes.push_back(Node("n" + std::to_string(i), static_cast<uint32_t>(i % 5) + 1, 8,
                         {{z, "z" + std::to_string(i % 3)}}));
  }
  auto first = PlaceGang({20, 3}, nodes);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  std::mt19937 rng(42);
  for (int round = 0; round < 10; ++round) {
    std::shuffle(nodes.begin(), nodes.end(), rng);
    EXPECT_EQ(Names(PlaceGang({20, 3}, nodes)), first->nodes);
  }
}

TEST(GangPlanner, NaturalNameOrder) {
  EXPECT_TRUE(NaturalNameLess("n2", "n10"));
  EXPECT_FALSE(NaturalNameLess("n10", "n2"));
  EXPECT_TRUE(NaturalNameLess("a", "b"));
  EXPECT_TRUE(NaturalNameLess("n", "n1"));
  EXPECT_TRUE(NaturalNameLess("rack1-n9", "rack1-n10"));
  EXPECT_TRUE(NaturalNameLess("rack1-n10", "rack2-n1"));
  EXPECT_FALSE(NaturalNameLess("x", "x"));
  // Leading zeros: equal numbers, ordered by plain comparison so the order stays strict.
  EXPECT_NE(NaturalNameLess("n01", "n1"), NaturalNameLess("n1", "n01"));
}

TEST(GangPlanner, ThousandOutOfTenThousandIsFast) {
  const std::string z(kZoneLabel), r(kRackLabel);
  std::vector<NodeCapacity> nodes;
  std::mt19937 rng(7);
  for (int i = 0; i < 10000; ++i) {
    NodeCapacity n =
        Node("node-" + std::to_string(i), rng() % 9, 8,
             {{z, "zone-" + std::to_string(i % 4)}, {r, "rack-" + std::to_string(i % 200)}});
    n.ready = rng() % 50 != 0;
    nodes.push_back(std::move(n));
  }
  auto start = std::chrono::steady_clock::now();
  auto p = PlaceGang({1000, 4}, nodes);
  auto elapsed = std::chrono::steady_clock::now() - start;
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->nodes.size(), 1000u);
  double ms = std::chrono::duration<double, std::milli>(elapsed).count();
  std::printf("PlaceGang: 1000 of 10000 nodes in %.2f ms\n", ms);
  EXPECT_LT(ms, 2000.0);
}

}  // namespace
}  // namespace trainlet::coordinator
