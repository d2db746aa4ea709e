// The torch runtime plugin: torchrun detection, the PET_* and direct-launch env contracts for
// several layouts, numProcPerNode auto, the reserved MASTER_PORT, and errors.
#include "plugins/runtime/torch/torch_runtime.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

#include "runtime_test_util.h"

namespace trainlet {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing_util::Argv;
using testing_util::Env;
using testing_util::ExecLauncher;
using testing_util::LayoutAndRender;
using testing_util::MakeRequest;
using testing_util::PortsPerNode;
using testing_util::Topo;
using testing_util::WithoutPorts;

TEST(TorchLauncherTest, Detects) {
  EXPECT_TRUE(IsTorchLauncher({"torchrun", "train.py"}));
  EXPECT_TRUE(IsTorchLauncher({"/usr/bin/torchrun", "--nproc-per-node=2", "train.py"}));
  EXPECT_TRUE(IsTorchLauncher({"/opt/venv/bin/torchrun"}));
  EXPECT_TRUE(IsTorchLauncher({"python", "-m", "torch.distributed.run", "train.py"}));
  EXPECT_TRUE(IsTorchLauncher({"python3", "-m", "torch.distributed.run", "train.py"}));
  EXPECT_TRUE(IsTorchLauncher({"/usr/bin/python3.11", "-u", "-m", "torch.distributed.run", "x"}));
  EXPECT_TRUE(IsTorchLauncher({"python3", "-mtorch.distributed.run", "train.py"}));
  EXPECT_TRUE(IsTorchLauncher({"python3", "-X", "dev", "-m", "torch.distributed.run", "t.py"}));
  EXPECT_TRUE(IsTorchLauncher({"tune", "run", "full_finetune_distributed", "--config", "c"}));
}

TEST(TorchLauncherTest, DoesNotDetect) {
  EXPECT_FALSE(IsTorchLauncher({}));
  EXPECT_FALSE(IsTorchLauncher({"bash", "-c", "torchrun train.py"}));  // hidden in a shell
  EXPECT_FALSE(IsTorchLauncher({"sh", "-c", "python3 -m torch.distributed.run t.py"}));
  EXPECT_FALSE(IsTorchLauncher({"python3", "train.py", "-m", "torch.distributed.run"}));
  EXPECT_FALSE(IsTorchLauncher({"python3", "-c", "import torch", "-m", "torch.distributed.run"}));
  EXPECT_FALSE(IsTorchLauncher({"python3", "-m", "torch.distributed.launch", "t.py"}));
  EXPECT_FALSE(IsTorchLauncher({"python3", "-m"}));
  EXPECT_FALSE(IsTorchLauncher({"python3"}));
  EXPECT_FALSE(IsTorchLauncher({"torchrunner", "t.py"}));
  EXPECT_FALSE(IsTorchLauncher({"mytorchrun"}));
  EXPECT_FALSE(IsTorchLauncher({"pythonista", "-m", "torch.distributed.run"}));
  EXPECT_FALSE(IsTorchLauncher({"tune", "ls"}));
  EXPECT_FALSE(IsTorchLauncher({"/usr/bin/python3", "train.py"}));
}

TEST(TorchRuntimeTest, NameAndPorts) {
  auto plugin = MakeTorchRuntime();
  EXPECT_EQ(plugin->name(), "torch");
  PlanRequest req = MakeRequest(3, "2", {"python3", "train.py"});
  EXPECT_EQ(PortsPerNode(*plugin, req, 0), 1u);  // MASTER_PORT on node rank 0
  EXPECT_EQ(PortsPerNode(*plugin, req, 1), 0u);
  EXPECT_EQ(PortsPerNode(*plugin, req, 2), 0u);
  EXPECT_FALSE(ExecLauncher(*plugin, req).has_value());
}

TEST(TorchRuntimeTest, ProcsPerNode) {
  auto plugin = MakeTorchRuntime();
  EXPECT_EQ(*plugin->ProcsPerNode("", nullptr), 1u);
  EXPECT_EQ(*plugin->ProcsPerNode("8", nullptr), 8u);
  const v1::Topology dgx = Topo(8, 224);
  const v1::Topology cpu = Topo(0, 16);
  EXPECT_EQ(*plugin->ProcsPerNode("auto", &dgx), 8u);   // GPUs
  EXPECT_EQ(*plugin->ProcsPerNode("auto", &cpu), 16u);  // else CPUs
  EXPECT_EQ(*plugin->ProcsPerNode("auto", nullptr),
            1u);  // before placement: resolved in the layout
  for (const char* bad : {"0", "x", "-2", "auto2", "4097"}) {
    auto r = plugin->ProcsPerNode(bad, nullptr);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), PluginErrorCode::kInvalid);
    EXPECT_THAT(r.status().message(), HasSubstr("spec.trainer.numProcPerNode")) << bad;
  }
}

// Direct launch: every rank gets the torchrun worker env; ranks in node-major order.
void CheckDirect(uint32_t nodes, uint32_t per_node) {
  auto plugin = MakeTorchRuntime();
  PlanRequest req = MakeRequest(nodes, std::to_string(per_node), {"/usr/bin/python3", "train.py"});
  req.env = {{"FOO", "bar"}, {"MASTER_PORT", "1"}};  // the plugin's value wins
  auto plans = LayoutAndRender(*plugin, req);
  ASSERT_TRUE(plans.ok()) << plans.status().ToString();
  ASSERT_EQ(plans->size(), nodes);
  std::set<uint32_t> ranks;
  for (uint32_t n = 0; n < nodes; ++n) {
    const v1::LaunchPlan& plan = (*plans)[n];
    EXPECT_EQ(plan.node_rank(), n);
    EXPECT_EQ(plan.attempt(), 2u);
    ASSERT_EQ(plan.workers_size(), static_cast<int>(per_node));
    for (uint32_t l = 0; l < per_node; ++l) {
      const v1::WorkerSpec& w = plan.workers(static_cast<int>(l));
      const uint32_t rank = n * per_node + l;
      ranks.insert(rank);
      EXPECT_EQ(w.rank(), rank);
      EXPECT_THAT(Argv(w), ElementsAre("/usr/bin/python3", "train.py"));
      auto env = Env(w);
      EXPECT_EQ(env["RANK"], std::to_string(rank));
      EXPECT_EQ(env["LOCAL_RANK"], std::to_string(l));
      EXPECT_EQ(env["WORLD_SIZE"], std::to_string(nodes * per_node));
      EXPECT_EQ(env["LOCAL_WORLD_SIZE"], std::to_string(per_node));
      EXPECT_EQ(env["GROUP_RANK"], std::to_string(n));
      EXPECT_EQ(env["GROUP_WORLD_SIZE"], std::to_string(nodes));
      EXPECT_EQ(env["MASTER_ADDR"], "10.0.0.1");
      EXPECT_EQ(env["MASTER_PORT"], "30000");
      EXPECT_EQ(env["PET_NNODES"], std::to_string(nodes));
      EXPECT_EQ(env["PET_NPROC_PER_NODE"], std::to_string(per_node));
      EXPECT_EQ(env["PET_NODE_RANK"], std::to_string(n));
      EXPECT_EQ(env["PET_MASTER_ADDR"], "10.0.0.1");
      EXPECT_EQ(env["PET_MASTER_PORT"], "30000");
      EXPECT_EQ(env["TORCHELASTIC_RESTART_COUNT"], "1");  // attempt 2
      EXPECT_EQ(env["TRAINLET_RANK"], std::to_string(rank));
      EXPECT_EQ(env["FOO"], "bar");
    }
  }
  EXPECT_EQ(ranks.size(), nodes * per_node);
}

TEST(TorchRuntimeTest, DirectLaunchLayouts) {
  CheckDirect(1, 1);
  CheckDirect(1, 4);
  CheckDirect(3, 2);
  CheckDirect(4, 8);
}

TEST(TorchRuntimeTest, TorchrunGetsOneProcessPerNodeWithPetEnv) {
  auto plugin = MakeTorchRuntime();
  for (const auto& argv : std::vector<std::vector<std::string>>{
           {"torchrun", "--no-python", "python3", "-c", "print(1)"},
           {"python3", "-m", "torch.distributed.run", "train.py"}}) {
    PlanRequest req = MakeRequest(3, "4", argv);
    auto plans = LayoutAndRender(*plugin, req);
    ASSERT_TRUE(plans.ok()) << plans.status().ToString();
    ASSERT_EQ(plans->size(), 3u);
    for (uint32_t n = 0; n < 3; ++n) {
      ASSERT_EQ((*plans)[n].workers_size(), 1) << argv[0];
      const v1::WorkerSpec& w = (*plans)[n].workers(0);
      EXPECT_EQ(Argv(w), argv);
      auto env = Env(w);
      EXPECT_EQ(env["PET_NNODES"], "3");
      EXPECT_EQ(env["PET_NPROC_PER_NODE"], "4");
      EXPECT_EQ(env["PET_NODE_RANK"], std::to_string(n));
      EXPECT_EQ(env["PET_MASTER_ADDR"], "10.0.0.1");
      EXPECT_EQ(env["PET_MASTER_PORT"], "30000");
      // torchrun sets these for its own workers; trainlet must not.
      EXPECT_EQ(env.count("RANK"), 0u);
      EXPECT_EQ(env.count("WORLD_SIZE"), 0u);
      EXPECT_EQ(env.count("MASTER_PORT"), 0u);
      EXPECT_EQ(env["TRAINLET_NODE_RANK"], std::to_string(n));
    }
  }
}

TEST(TorchRuntimeTest, LaunchModeSaysWhichWay) {
  auto plugin = MakeTorchRuntime();
  EXPECT_THAT(plugin->LaunchMode(MakeRequest(2, "2", {"torchrun", "t.py"})), HasSubstr("torchrun"));
  EXPECT_THAT(plugin->LaunchMode(MakeRequest(2, "2", {"torchrun", "t.py"})), HasSubstr("PET_"));
  const std::string direct = plugin->LaunchMode(MakeRequest(2, "2", {"bash", "-c", "torchrun x"}));
  EXPECT_THAT(direct, HasSubstr("direct"));
  EXPECT_THAT(direct, HasSubstr("no torchrun"));
}

TEST(TorchRuntimeTest, AutoUsesEachNodesTopology) {
  auto plugin = MakeTorchRuntime();
  PlanRequest req = MakeRequest(2, "auto", {"python3", "t.py"});
  req.nodes[0].topology = Topo(4, 64);  // 4 GPUs
  req.nodes[1].topology = Topo(0, 3);   // CPU only: 3 hardware threads
  auto plans = LayoutAndRender(*plugin, req);
  ASSERT_TRUE(plans.ok()) << plans.status().ToString();
  ASSERT_EQ((*plans)[0].workers_size(), 4);
  ASSERT_EQ((*plans)[1].workers_size(), 3);
  auto last = Env((*plans)[1].workers(2));
  EXPECT_EQ(last["RANK"], "6");
  EXPECT_EQ(last["WORLD_SIZE"], "7");
  EXPECT_EQ(last["LOCAL_WORLD_SIZE"], "3");
  EXPECT_EQ(last["PET_NPROC_PER_NODE"], "3");
  EXPECT_EQ(Env((*plans)[0].workers(0))["PET_NPROC_PER_NODE"], "4");
}

TEST(TorchRuntimeTest, NoReservedPortIsAnErrorNotAMadeUpPort) {
  auto plugin = MakeTorchRuntime();
  PlanRequest req = MakeRequest(2, "2", {"python3", "t.py"}, /*ports_per_node=*/0);
  auto r = LayoutAndRender(*plugin, req);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kInvalid);
  EXPECT_THAT(r.status().message(), HasSubstr("MASTER_PORT"));
  EXPECT_THAT(r.status().message(), HasSubstr("node-1"));
  // Ports on other nodes do not stand in for node 0's.
  req.nodes[1].ports = {40000};
  EXPECT_FALSE(LayoutAndRender(*plugin, req).ok());
}

TEST(TorchRuntimeTest, ErrorsNameTheField) {
  auto plugin = MakeTorchRuntime();
  auto r = LayoutAndRender(*plugin, MakeRequest(2, "2", {}));
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("spec.trainer.command"));
  r = LayoutAndRender(*plugin, MakeRequest(2, "two", {"t"}));
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("spec.trainer.numProcPerNode"));
}

TEST(TorchRuntimeTest, Ipv6MasterAddrIsBare) {
  auto plugin = MakeTorchRuntime();
  PlanRequest req = MakeRequest(1, "1", {"t"});
  req.nodes[0].address = "fd00::1";
  auto plans = LayoutAndRender(*plugin, req);
  ASSERT_TRUE(plans.ok());
  EXPECT_EQ(Env((*plans)[0].workers(0))["MASTER_ADDR"], "fd00::1");
}

}  // namespace
}  // namespace trainlet
