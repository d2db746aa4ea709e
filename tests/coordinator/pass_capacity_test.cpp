// One scheduling pass's free room (coordinator/pass_capacity): charged in place, and a shape that
// did not fit is answered again without the planner.
#include "coordinator/pass_capacity.h"

#include <gtest/gtest.h>

#include <string>

namespace trainlet::coordinator {
namespace {

class PassCapacityTest : public ::testing::Test {
 protected:
  void Add(const std::string& name, uint32_t slots) {
    v1::NodeInfo info;
    info.set_name(name);
    info.set_slots(slots);
    (*info.mutable_allocatable())["cpu"] = 4;
    ASSERT_TRUE(
        registry_.Register(info, "rid-" + name, "key-" + name, NodeRegistry::Clock::now(), 0).ok());
  }
  static GangRequest Gang(uint32_t nodes, uint32_t slots) {
    GangRequest g;
    g.num_nodes = nodes;
    g.slots_per_node = slots;
    return g;
  }
  NodeRegistry registry_{std::chrono::milliseconds(1000), std::chrono::milliseconds(3000)};
};

TEST_F(PassCapacityTest, StartsFromWhatPlacedJobsHoldAndChargesPlacements) {
  Add("n1", 4);
  Add("n2", 4);
  Resources cpu;
  cpu[ResourceKind::kCpu] = 1000;
  PassCapacity room(registry_, {{"n1", 3}}, {});
  EXPECT_EQ(room.FreeSlots("n1"), 1u);
  EXPECT_EQ(room.FreeSlots("n2"), 4u);
  EXPECT_EQ(room.FreeSlots("nowhere"), 0u);

  auto placed = room.Place(Gang(1, 2));
  ASSERT_TRUE(placed.ok()) << placed.status().ToString();
  EXPECT_EQ(placed->nodes, std::vector<std::string>{"n2"});
  room.Charge(placed->nodes, 2, cpu);
  EXPECT_EQ(room.FreeSlots("n2"), 2u);
  // cpu is charged too: 4 cpus less 1 leaves 3, so a request of 4 cpus no longer fits on n2.
  GangRequest big = Gang(1, 1);
  big.resources[ResourceKind::kCpu] = 4000;
  auto on_n1 = room.Place(big);
  ASSERT_TRUE(on_n1.ok()) << on_n1.status().ToString();
  EXPECT_EQ(on_n1->nodes, std::vector<std::string>{"n1"});
  room.Charge({"n2"}, 5, {});  // more than it has: none left, no wrap-around
  EXPECT_EQ(room.FreeSlots("n2"), 0u);
}

TEST_F(PassCapacityTest, AShapeThatDidNotFitIsAnsweredWithoutThePlanner) {
  Add("n1", 2);
  PassCapacity room(registry_, {}, {});
  auto first = room.Place(Gang(2, 1));
  ASSERT_EQ(first.status().code(), ErrorCode::kUnavailable);
  auto again = room.Place(Gang(2, 1));
  EXPECT_EQ(again.status().message(), first.status().message());
  EXPECT_EQ(room.planned(), 1u);
  EXPECT_EQ(room.remembered(), 1u);
  // Another shape still runs the planner, and fits.
  EXPECT_TRUE(room.Place(Gang(1, 2)).ok());
  EXPECT_EQ(room.planned(), 2u);
}

TEST_F(PassCapacityTest, AnInvalidRequestIsNotRemembered) {
  Add("n1", 2);
  PassCapacity room(registry_, {}, {});
  EXPECT_EQ(room.Place(Gang(0, 1)).status().code(), ErrorCode::kInvalid);
  EXPECT_EQ(room.Place(Gang(0, 1)).status().code(), ErrorCode::kInvalid);
  EXPECT_EQ(room.planned(), 2u);
}

TEST(ShapeKey, DiffersForEveryFieldThePlannerReads) {
  GangRequest a;
  a.num_nodes = 2;
  a.slots_per_node = 1;
  GangRequest b = a;
  EXPECT_EQ(ShapeKey(a), ShapeKey(b));
  b.slots_per_node = 2;
  EXPECT_NE(ShapeKey(a), ShapeKey(b));
  b = a;
  b.resources[ResourceKind::kMemory] = 1;
  EXPECT_NE(ShapeKey(a), ShapeKey(b));
  b = a;
  b.node_selector["pool"] = "x";
  EXPECT_NE(ShapeKey(a), ShapeKey(b));
  // Field boundaries cannot be shifted into another key: {"ab": "c"} is not {"a": "bc"}.
  GangRequest c = a, d = a;
  c.node_selector["ab"] = "c";
  d.node_selector["a"] = "bc";
  EXPECT_NE(ShapeKey(c), ShapeKey(d));
  b = a;
  b.tolerations.push_back({"k", "Exists", "", "NoSchedule"});
  EXPECT_NE(ShapeKey(a), ShapeKey(b));
  // The admitted flavor: its labels and tolerations narrow the nodes, its name is in the reason.
  b = a;
  b.flavor.node_labels["pool"] = "x";
  EXPECT_NE(ShapeKey(a), ShapeKey(b));
  GangRequest e = b;
  e.flavor.flavors = "x-flavor";
  EXPECT_NE(ShapeKey(b), ShapeKey(e));
  e = b;
  e.flavor.tolerations.push_back({"k", "Exists", "", "NoSchedule"});
  EXPECT_NE(ShapeKey(b), ShapeKey(e));
  // A flavor's label is not the job's own selector (the reason names the flavor).
  GangRequest own = a;
  own.node_selector["pool"] = "x";
  EXPECT_NE(ShapeKey(own), ShapeKey(b));
}

}  // namespace
}  // namespace trainlet::coordinator

namespace trainlet::coordinator {
namespace {

TEST_F(PassCapacityTest, TheFingerprintFollowsTheRoom) {
  Add("n1", 4);
  Add("n2", 4);
  const uint64_t empty = PassCapacity(registry_, {}, {}).Fingerprint();
  EXPECT_EQ(PassCapacity(registry_, {}, {}).Fingerprint(), empty);  // same room, same print
  PassCapacity room(registry_, {}, {});
  room.Charge({"n1"}, 1, {});
  const uint64_t charged = room.Fingerprint();
  EXPECT_NE(charged, empty);
  // Kept current in place: equal to a room built with that usage from the start.
  EXPECT_EQ(PassCapacity(registry_, {{"n1", 1}}, {}).Fingerprint(), charged);
  // Which node holds it matters, not only how much is held.
  EXPECT_NE(PassCapacity(registry_, {{"n2", 1}}, {}).Fingerprint(), charged);
  Resources cpu;
  cpu[ResourceKind::kCpu] = 500;
  EXPECT_NE(PassCapacity(registry_, {}, {{"n1", cpu}}).Fingerprint(), empty);
  // A cordon changes it.
  ASSERT_TRUE(registry_.SetSchedulable("n2", false, "maintenance").ok());
  EXPECT_NE(PassCapacity(registry_, {}, {}).Fingerprint(), empty);
}

TEST(NodeHash, ReadsLabelsAndTaints) {
  NodeCapacity a;
  a.name = "n1";
  NodeCapacity b = a;
  EXPECT_EQ(NodeHash(a), NodeHash(b));
  b.labels["pool"] = "gpu";
  EXPECT_NE(NodeHash(a), NodeHash(b));
  b = a;
  b.taints.push_back({"k", "v", "NoSchedule"});
  EXPECT_NE(NodeHash(a), NodeHash(b));
  b = a;
  b.healthy = false;
  EXPECT_NE(NodeHash(a), NodeHash(b));
}

}  // namespace
}  // namespace trainlet::coordinator
