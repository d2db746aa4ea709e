// The native mlx runtime plugin (ring hostfile, jaccl device matrix, backend choice) and the
// plugin selection rules of registry.cpp.
#include "plugins/runtime/mlx/mlx_runtime.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "plugins/runtime/worker_env.h"
#include "runtime_test_util.h"

namespace trainlet {
namespace {

using ::testing::HasSubstr;
using testing_util::Env;
using testing_util::LayoutAndRender;
using testing_util::MakeRequest;
using testing_util::PortsPerNode;
using testing_util::Topo;
using testing_util::WithoutPorts;

nlohmann::json FileJson(const v1::LaunchPlan& plan, const std::string& path) {
  for (const auto& f : plan.files()) {
    if (f.path() == path) return nlohmann::json::parse(f.content());
  }
  ADD_FAILURE() << "no file " << path;
  return nullptr;
}

TEST(MlxRuntimeTest, RingOnePortPerRank) {
  auto plugin = MakeMlxRuntime();
  EXPECT_EQ(plugin->name(), "mlx");
  PlanRequest req = MakeRequest(2, "2", {"/usr/bin/python3", "ring.py"}, 2);
  EXPECT_EQ(PortsPerNode(*plugin, req, 0), 2u);
  EXPECT_EQ(PortsPerNode(*plugin, req, 1), 2u);
  auto plans = LayoutAndRender(*plugin, req);
  ASSERT_TRUE(plans.ok()) << plans.status().ToString();
  ASSERT_EQ(plans->size(), 2u);
  const nlohmann::json want = nlohmann::json::parse(R"([
      ["10.0.0.1:30000"], ["10.0.0.1:30001"], ["10.0.0.2:30100"], ["10.0.0.2:30101"]])");
  for (uint32_t n = 0; n < 2; ++n) {
    EXPECT_EQ(FileJson((*plans)[n], "mlx-hostfile.json"), want);  // same file on every node
    ASSERT_EQ((*plans)[n].workers_size(), 2);
    for (uint32_t l = 0; l < 2; ++l) {
      auto env = Env((*plans)[n].workers(static_cast<int>(l)));
      EXPECT_EQ(env["MLX_RANK"], std::to_string(n * 2 + l));
      EXPECT_EQ(env["MLX_HOSTFILE"], "$(TRAINLET_WORK_DIR)/mlx-hostfile.json");
      EXPECT_EQ(env.count("MLX_IBV_DEVICES"), 0u);
    }
  }
  EXPECT_THAT(plugin->LaunchMode(req), HasSubstr("ring"));
}

TEST(MlxRuntimeTest, RingSeveralConnectionsPerRank) {
  auto plugin = MakeMlxRuntime();
  PlanRequest req = MakeRequest(3, "1", {"r"}, 2);
  req.annotations[std::string(kMlxRingConnectionsAnnotation)] = "2";
  EXPECT_EQ(PortsPerNode(*plugin, req, 2), 2u);
  auto plans = LayoutAndRender(*plugin, req);
  ASSERT_TRUE(plans.ok()) << plans.status().ToString();
  const nlohmann::json want = nlohmann::json::parse(R"([
      ["10.0.0.1:30000", "10.0.0.1:30001"],
      ["10.0.0.2:30100", "10.0.0.2:30101"],
      ["10.0.0.3:30200", "10.0.0.3:30201"]])");
  EXPECT_EQ(FileJson((*plans)[2], "mlx-hostfile.json"), want);
  EXPECT_THAT(plugin->LaunchMode(req), HasSubstr("2 connection"));
}

TEST(MlxRuntimeTest, RingErrors) {
  auto plugin = MakeMlxRuntime();
  // Too few ports reserved on node 2 for its second rank: named, never made up.
  PlanRequest req = MakeRequest(2, "2", {"r"}, 2);
  req.nodes[1].ports = {30100};
  auto r = LayoutAndRender(*plugin, req);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("MLX_HOSTFILE (rank 3)"));
  EXPECT_THAT(r.status().message(), HasSubstr("node-2"));

  for (const char* bad : {"0", "17", "many"}) {
    req = MakeRequest(2, "1", {"r"});
    req.annotations[std::string(kMlxRingConnectionsAnnotation)] = bad;
    r = LayoutAndRender(*plugin, req);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_THAT(r.status().message(),
                HasSubstr("metadata.annotations[trainlet.io/mlx-ring-connections]"));
    // Refused by the layout, before any port is asked for.
    EXPECT_FALSE(plugin->Layout(WithoutPorts(req)).ok()) << bad;
  }
  req = MakeRequest(2, "1", {"r"});
  req.annotations[std::string(kMlxBackendAnnotation)] = "nccl";
  r = LayoutAndRender(*plugin, req);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("metadata.annotations[trainlet.io/mlx-backend]"));
  r = LayoutAndRender(*plugin, MakeRequest(2, "1", {}));
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("spec.trainer.command"));
}

PlanRequest RdmaRequest(uint32_t nodes) {
  PlanRequest req = MakeRequest(nodes, "1", {"python3", "j.py"});
  for (auto& n : req.nodes) n.rdma_devices = {"rdma_en2", "rdma_en3", "rdma_en4"};
  return req;
}

TEST(MlxRuntimeTest, JacclWhenEveryNodeHasRdma) {
  auto plugin = MakeMlxRuntime();
  PlanRequest req = RdmaRequest(4);
  EXPECT_EQ(*ChooseMlxBackend(req), MlxBackend::kJaccl);
  EXPECT_EQ(PortsPerNode(*plugin, req, 0), 1u);
  EXPECT_EQ(PortsPerNode(*plugin, req, 1), 0u);
  auto plans = LayoutAndRender(*plugin, req);
  ASSERT_TRUE(plans.ok()) << plans.status().ToString();
  const nlohmann::json want = nlohmann::json::parse(R"([
      [null, "rdma_en2", "rdma_en3", "rdma_en4"],
      ["rdma_en2", null, "rdma_en3", "rdma_en4"],
      ["rdma_en2", "rdma_en3", null, "rdma_en4"],
      ["rdma_en2", "rdma_en3", "rdma_en4", null]])");
  for (uint32_t n = 0; n < 4; ++n) {
    EXPECT_EQ(FileJson((*plans)[n], "mlx-ibv-devices.json"), want);
    ASSERT_EQ((*plans)[n].workers_size(), 1);
    auto env = Env((*plans)[n].workers(0));
    EXPECT_EQ(env["MLX_RANK"], std::to_string(n));
    EXPECT_EQ(env["MLX_JACCL_COORDINATOR"], "10.0.0.1:30000");
    EXPECT_EQ(env["MLX_IBV_DEVICES"], "$(TRAINLET_WORK_DIR)/mlx-ibv-devices.json");
    EXPECT_EQ(env.count("MLX_HOSTFILE"), 0u);
  }
  EXPECT_THAT(plugin->LaunchMode(req), HasSubstr("jaccl"));
  // Forced to the ring, the same nodes get a hostfile.
  req.annotations[std::string(kMlxBackendAnnotation)] = "ring";
  EXPECT_EQ(*ChooseMlxBackend(req), MlxBackend::kRing);
}

TEST(MlxRuntimeTest, OneSwitchedNicFacesEveryPeer) {
  PlanRequest req = MakeRequest(3, "1", {"j"});
  for (auto& n : req.nodes) n.rdma_devices = {"mlx5_0"};
  EXPECT_EQ(nlohmann::json::parse(MlxIbvDevicesJson(req.nodes)),
            nlohmann::json::parse(R"([[null, "mlx5_0", "mlx5_0"], ["mlx5_0", null, "mlx5_0"],
                                      ["mlx5_0", "mlx5_0", null]])"));
}

TEST(MlxRuntimeTest, RdmaDevicesFromTopologyNics) {
  PlacedNode node;
  auto* nic = node.topology.add_nics();
  nic->add_os_devices("ens1f0");
  nic->add_os_devices("mlx5_0");
  auto* ib = node.topology.add_nics();
  ib->add_os_devices("ib0");  // IPoIB interface, not a verbs device
  ib->add_os_devices("mlx5_1");
  EXPECT_EQ(RdmaDevices(node), (std::vector<std::string>{"mlx5_0", "mlx5_1"}));
  node.rdma_devices = {"rdma_en5"};  // what the coordinator filled wins
  EXPECT_EQ(RdmaDevices(node), (std::vector<std::string>{"rdma_en5"}));
  EXPECT_TRUE(IsVerbsDeviceName("rdma_en2"));
  EXPECT_TRUE(IsVerbsDeviceName("efa_0"));
  EXPECT_FALSE(IsVerbsDeviceName("eth0"));
  EXPECT_FALSE(IsVerbsDeviceName("mlx5_"));

  // Topology-only nodes select jaccl too.
  PlanRequest req = MakeRequest(2, "1", {"j"});
  for (auto& n : req.nodes) n.topology.add_nics()->add_os_devices("mlx5_0");
  EXPECT_EQ(*ChooseMlxBackend(req), MlxBackend::kJaccl);
}

TEST(MlxRuntimeTest, AutoFallsBackToRing) {
  PlanRequest req = RdmaRequest(2);
  req.nodes[1].rdma_devices.clear();  // one node without RDMA
  EXPECT_EQ(*ChooseMlxBackend(req), MlxBackend::kRing);
  req = RdmaRequest(2);
  req.num_proc_per_node = "2";  // several ranks per node
  EXPECT_EQ(*ChooseMlxBackend(req), MlxBackend::kRing);
  EXPECT_EQ(*ChooseMlxBackend(RdmaRequest(1)), MlxBackend::kRing);  // a single node
}

TEST(MlxRuntimeTest, ForcedJacclErrors) {
  PlanRequest req = RdmaRequest(2);
  req.annotations[std::string(kMlxBackendAnnotation)] = "jaccl";
  req.nodes[1].rdma_devices.clear();
  auto r = LayoutAndRender(*MakeMlxRuntime(), req);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("node-2"));
  EXPECT_THAT(r.status().message(), HasSubstr("RDMA"));
  req = RdmaRequest(2);
  req.annotations[std::string(kMlxBackendAnnotation)] = "jaccl";
  req.num_proc_per_node = "2";
  r = LayoutAndRender(*MakeMlxRuntime(), req);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("spec.trainer.numProcPerNode"));
  req = RdmaRequest(2);
  req.nodes[0].ports.clear();
  r = LayoutAndRender(*MakeMlxRuntime(), req);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("MLX_JACCL_COORDINATOR"));
}

TEST(RuntimeSelectionTest, Rules) {
  const std::map<std::string, std::string> mlx = {{"trainer.kubeflow.org/framework", "mlx"}};
  const std::map<std::string, std::string> torch = {{"trainer.kubeflow.org/framework", "torch"}};
  const std::map<std::string, std::string> tune = {{"trainer.kubeflow.org/framework", "torchtune"}};
  ASSERT_NE(SelectRuntimePlugin("plain", mlx), nullptr);
  EXPECT_EQ(SelectRuntimePlugin("plain", mlx)->name(), "mlx");  // native: no mpi section
  EXPECT_EQ(SelectRuntimePlugin("mpi", mlx)->name(), "mpi");    // Kubeflow's mlx-distributed
  EXPECT_EQ(SelectRuntimePlugin("torch", torch)->name(), "torch");
  EXPECT_EQ(SelectRuntimePlugin("torch", tune)->name(), "torch");  // torchtune-* runtimes
  EXPECT_EQ(SelectRuntimePlugin("jax", {})->name(), "jax");
  EXPECT_EQ(SelectRuntimePlugin("xgboost", {})->name(), "xgboost");
  EXPECT_EQ(SelectRuntimePlugin("plain", {})->name(), "plain");
  EXPECT_EQ(SelectRuntimePlugin("flux", {}), nullptr);
  const auto names = RuntimePluginNames();
  for (const char* n : {"plain", "mpi", "torch", "jax", "xgboost", "mlx"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
    ASSERT_NE(FindRuntimePlugin(n), nullptr) << n;
    EXPECT_EQ(FindRuntimePlugin(n)->name(), n);
  }
}

}  // namespace
}  // namespace trainlet
