// What the planner is given: a job's request (GangRequestOf) and the nodes' room (NodeCapacities).
#include "coordinator/placement_inputs.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

namespace trainlet::coordinator {
namespace {

TEST(GangRequestOf, MergesSelectorsAndTolerationsAndParsesResources) {
  trainjob::TrainJob spec;
  spec.name = "j";
  spec.trainer.resources_per_node = {
      {"cpu", "2"}, {"nvidia.com/gpu", "4"}, {"ephemeral-storage", "1Gi"}};
  spec.node_selector = {{"zone", "a"}, {"pool", "spec"}};
  spec.tolerations = {{"spec-key", "Exists", "", "NoSchedule"}};
  trainjob::TrainingRuntime runtime;
  runtime.node_selector = {{"pool", "runtime"}};
  runtime.tolerations = {{"runtime-key", "Exists", "", "NoSchedule"}};

  std::vector<std::string> warnings;
  auto gang = GangRequestOf(spec, runtime, warnings);
  ASSERT_TRUE(gang.ok()) << gang.status().ToString();
  EXPECT_EQ(gang->resources[ResourceKind::kCpu], 2000);
  EXPECT_EQ(gang->resources[ResourceKind::kNvidiaGpu], 4);
  EXPECT_EQ(gang->node_selector,
            (std::map<std::string, std::string>{{"zone", "a"}, {"pool", "spec"}}));
  ASSERT_EQ(gang->tolerations.size(), 2u);
  EXPECT_EQ(gang->tolerations[0].key, "runtime-key");
  EXPECT_EQ(gang->tolerations[1].key, "spec-key");
  EXPECT_EQ(gang->num_nodes, 0u);  // the caller sizes it when placing
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(
      warnings[0].rfind("TrainJob/j: spec.trainer.resourcesPerNode.ephemeral-storage: ignored", 0),
      0u)
      << warnings[0];
}

TEST(GangRequestOf, ABadQuantityNamesTheField) {
  trainjob::TrainJob spec;
  spec.name = "j";
  spec.trainer.resources_per_node = {{"memory", "lots"}};
  std::vector<std::string> warnings;
  auto gang = GangRequestOf(spec, trainjob::TrainingRuntime{}, warnings);
  EXPECT_EQ(gang.status().code(), ErrorCode::kInvalid);
  EXPECT_NE(gang.status().message().find("spec.trainer.resourcesPerNode.memory"),
            std::string::npos);
}

class NodeCapacitiesTest : public ::testing::Test {
 protected:
  void Add(const std::string& name, uint32_t slots, int64_t cpus) {
    v1::NodeInfo info;
    info.set_name(name);
    info.set_slots(slots);
    (*info.mutable_labels())["zone"] = "z-" + name;
    (*info.mutable_allocatable())["cpu"] = cpus;
    ASSERT_TRUE(
        registry_.Register(info, "rid-" + name, "key-" + name, NodeRegistry::Clock::now(), 0).ok());
  }
  NodeRegistry registry_{std::chrono::milliseconds(1000), std::chrono::milliseconds(3000)};
};

TEST_F(NodeCapacitiesTest, SubtractsWhatPlacedJobsHold) {
  Add("n1", 4, 8);
  Add("n2", 2, 8);
  Resources held;
  held[ResourceKind::kCpu] = 3000;
  const auto caps = NodeCapacities(registry_, {{"n1", 3}, {"n2", 5}}, {{"n1", held}});
  ASSERT_EQ(caps.size(), 2u);
  EXPECT_EQ(caps[0].name, "n1");
  EXPECT_EQ(caps[0].total_slots, 4u);
  EXPECT_EQ(caps[0].free_slots, 1u);
  EXPECT_TRUE(caps[0].ready);
  EXPECT_TRUE(caps[0].schedulable);
  EXPECT_TRUE(caps[0].healthy);
  EXPECT_EQ(caps[0].labels.at("zone"), "z-n1");
  EXPECT_EQ(caps[0].allocatable[ResourceKind::kCpu], 8000);
  EXPECT_EQ(caps[0].free_resources[ResourceKind::kCpu], 5000);
  EXPECT_EQ(caps[1].free_slots, 0u);  // more used than it has: none free, no wrap-around
  EXPECT_EQ(caps[1].free_resources[ResourceKind::kCpu], 8000);
}

TEST_F(NodeCapacitiesTest, CordonedAndUnhealthyNodesSaySo) {
  Add("n1", 4, 8);
  ASSERT_TRUE(registry_.SetSchedulable("n1", false, "maintenance").ok());
  registry_.SetHealth("n1", false, "disk");
  const auto caps = NodeCapacities(registry_, {}, {});
  ASSERT_EQ(caps.size(), 1u);
  EXPECT_FALSE(caps[0].schedulable);
  EXPECT_FALSE(caps[0].healthy);
  EXPECT_EQ(caps[0].free_slots, 4u);
}

}  // namespace
}  // namespace trainlet::coordinator
