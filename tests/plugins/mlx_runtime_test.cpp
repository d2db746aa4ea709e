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
  req.annotations[std::string(kMlxBackendAnnotation)] = "gloo";
  r = LayoutAndRender(*plugin, req);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(),
              HasSubstr("metadata.annotations[trainlet.io/mlx-backend]: must be ring, jaccl, "
                        "jaccl-ring, nccl or auto, got \"gloo\""));
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

// The worker env without the TRAINLET_* variables every worker gets.
std::map<std::string, std::string> MlxEnvOnly(const v1::WorkerSpec& w) {
  auto env = Env(w);
  std::erase_if(env, [](const auto& e) { return e.first.rfind("TRAINLET_", 0) == 0; });
  return env;
}

// `nodes` nodes with `devices` RDMA devices each (rdma_en2, rdma_en3, ...), one process each.
PlanRequest RdmaNodes(uint32_t nodes, uint32_t devices) {
  PlanRequest req = MakeRequest(nodes, "1", {"python3", "j.py"});
  for (auto& n : req.nodes) {
    for (uint32_t d = 0; d < devices; ++d)
      n.rdma_devices.push_back("rdma_en" + std::to_string(d + 2));
  }
  return req;
}

TEST(MlxRuntimeTest, JacclRingNamesDevicesBetweenNeighboursOnly) {
  auto plugin = MakeMlxRuntime();
  PlanRequest req = RdmaNodes(4, 2);
  req.annotations[std::string(kMlxBackendAnnotation)] = "jaccl-ring";
  EXPECT_EQ(*ChooseMlxBackend(req), MlxBackend::kJacclRing);
  EXPECT_EQ(PortsPerNode(*plugin, req, 0), 1u);
  EXPECT_EQ(PortsPerNode(*plugin, req, 3), 0u);
  auto plans = LayoutAndRender(*plugin, req);
  ASSERT_TRUE(plans.ok()) << plans.status().ToString();
  // Node i's neighbours in node-rank order get its devices in turn; the node across the ring
  // gets none.
  const nlohmann::json want = nlohmann::json::parse(R"([
      [null, "rdma_en2", null, "rdma_en3"],
      ["rdma_en2", null, "rdma_en3", null],
      [null, "rdma_en2", null, "rdma_en3"],
      ["rdma_en2", null, "rdma_en3", null]])");
  for (uint32_t n = 0; n < 4; ++n) {
    EXPECT_EQ(FileJson((*plans)[n], "mlx-ibv-devices.json"), want);
    ASSERT_EQ((*plans)[n].workers_size(), 1);
    EXPECT_EQ(MlxEnvOnly((*plans)[n].workers(0)),
              (std::map<std::string, std::string>{
                  {"MLX_RANK", std::to_string(n)},
                  {"MLX_JACCL_RING", "1"},
                  {"MLX_JACCL_COORDINATOR", "10.0.0.1:30000"},
                  {"MLX_IBV_DEVICES", "$(TRAINLET_WORK_DIR)/mlx-ibv-devices.json"},
              }));
  }
  EXPECT_THAT(plugin->LaunchMode(req), HasSubstr("jaccl-ring"));
  // Plain jaccl on the same nodes: no MLX_JACCL_RING, the full mesh.
  req.annotations[std::string(kMlxBackendAnnotation)] = "jaccl";
  plans = LayoutAndRender(*plugin, req);
  ASSERT_TRUE(plans.ok());
  EXPECT_EQ(Env((*plans)[1].workers(0)).count("MLX_JACCL_RING"), 0u);
  EXPECT_EQ(FileJson((*plans)[1], "mlx-ibv-devices.json")[1],
            nlohmann::json::parse(R"(["rdma_en2", null, "rdma_en3", "rdma_en2"])"));
}

TEST(MlxRuntimeTest, SeveralDevicesPerLinkAreListed) {
  // A ring of 3: every node neighbours both others; 4 cables each, 2 per neighbour, dealt in
  // turn (device k faces peer k mod 2).
  PlanRequest req = RdmaNodes(3, 4);
  const nlohmann::json ring = nlohmann::json::parse(R"([
      [null, ["rdma_en2", "rdma_en4"], ["rdma_en3", "rdma_en5"]],
      [["rdma_en2", "rdma_en4"], null, ["rdma_en3", "rdma_en5"]],
      [["rdma_en2", "rdma_en4"], ["rdma_en3", "rdma_en5"], null]])");
  EXPECT_EQ(nlohmann::json::parse(MlxIbvDevicesJson(req.nodes, /*ring=*/true)), ring);
  // The mesh of the same nodes lists them the same way.
  EXPECT_EQ(nlohmann::json::parse(MlxIbvDevicesJson(req.nodes)), ring);
  // Two nodes, two cables between them: both on the one link, in a ring and in a mesh.
  req = RdmaNodes(2, 2);
  const nlohmann::json pair = nlohmann::json::parse(
      R"([[null, ["rdma_en2", "rdma_en3"]], [["rdma_en2", "rdma_en3"], null]])");
  EXPECT_EQ(nlohmann::json::parse(MlxIbvDevicesJson(req.nodes, true)), pair);
  EXPECT_EQ(nlohmann::json::parse(MlxIbvDevicesJson(req.nodes, false)), pair);
  // A ring uses the same number of connections on every link: the fewest any node can give.
  req = RdmaNodes(3, 4);
  req.nodes[2].rdma_devices = {"mlx5_0", "mlx5_1"};
  EXPECT_EQ(nlohmann::json::parse(MlxIbvDevicesJson(req.nodes, true)),
            nlohmann::json::parse(R"([[null, "rdma_en2", "rdma_en3"],
                                      ["rdma_en2", null, "rdma_en3"],
                                      ["mlx5_0", "mlx5_1", null]])"));
  // The typed matrix says the same.
  const auto matrix = MlxIbvDeviceMatrix(RdmaNodes(2, 2).nodes, true);
  EXPECT_EQ(matrix[0][1], (std::vector<std::string>{"rdma_en2", "rdma_en3"}));
  EXPECT_TRUE(matrix[0][0].empty());
}

TEST(MlxRuntimeTest, ForcedJacclRingErrors) {
  PlanRequest req = RdmaNodes(3, 2);
  req.annotations[std::string(kMlxBackendAnnotation)] = "jaccl-ring";
  req.num_proc_per_node = "2";
  auto r = LayoutAndRender(*MakeMlxRuntime(), req);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(),
              HasSubstr("spec.trainer.numProcPerNode: the jaccl-ring backend runs one process"));
  req = RdmaNodes(3, 2);
  req.annotations[std::string(kMlxBackendAnnotation)] = "jaccl-ring";
  req.nodes[2].rdma_devices.clear();
  r = LayoutAndRender(*MakeMlxRuntime(), req);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("jaccl-ring needs RDMA devices, and node node-3"));
}

// `nodes` Linux CUDA nodes with `gpus` NVIDIA GPUs each.
PlanRequest CudaNodes(uint32_t nodes, int gpus, const std::string& per_node) {
  PlanRequest req = MakeRequest(nodes, per_node, {"python3", "train.py"});
  for (auto& n : req.nodes) {
    n.topology = Topo(0, 64);
    for (int g = 0; g < gpus; ++g) {
      auto* gpu = n.topology.add_gpus();
      gpu->set_device_class(v1::PciDevice::CLASS_GPU);
      gpu->set_vendor("nvidia");
      gpu->set_vendor_id(0x10de);
    }
  }
  return req;
}

TEST(MlxRuntimeTest, NcclOnCudaNodes) {
  auto plugin = MakeMlxRuntime();
  PlanRequest req = CudaNodes(2, 4, "4");
  EXPECT_EQ(*ChooseMlxBackend(req), MlxBackend::kNccl);  // auto: CUDA everywhere
  EXPECT_EQ(PortsPerNode(*plugin, req, 0), 1u);
  EXPECT_EQ(PortsPerNode(*plugin, req, 1), 0u);
  auto plans = LayoutAndRender(*plugin, req);
  ASSERT_TRUE(plans.ok()) << plans.status().ToString();
  ASSERT_EQ(plans->size(), 2u);
  for (uint32_t n = 0; n < 2; ++n) {
    EXPECT_EQ((*plans)[n].files_size(), 0);  // NCCL needs no file
    ASSERT_EQ((*plans)[n].workers_size(), 4);
    for (uint32_t l = 0; l < 4; ++l) {
      const auto& w = (*plans)[n].workers(static_cast<int>(l));
      EXPECT_EQ(MlxEnvOnly(w), (std::map<std::string, std::string>{
                                   {"MLX_RANK", std::to_string(n * 4 + l)},
                                   {"MLX_WORLD_SIZE", "8"},
                                   {"NCCL_HOST_IP", "10.0.0.1"},
                                   {"NCCL_PORT", "30000"},
                                   {"CUDA_VISIBLE_DEVICES", std::to_string(l)},
                                   {"CUDA_DEVICE_ORDER", "PCI_BUS_ID"},
                               }))
          << "node " << n << " local rank " << l;
      EXPECT_EQ(Env(w)["TRAINLET_LOCAL_RANK"], std::to_string(l));
    }
  }
  EXPECT_THAT(plugin->LaunchMode(req), HasSubstr("nccl"));
}

TEST(MlxRuntimeTest, NcclGivesEachRankOneGpu) {
  // Fewer ranks than GPUs: each rank the first GPU of its block, where the agent binds its CPUs.
  PlanRequest req = CudaNodes(1, 8, "2");
  auto plans = LayoutAndRender(*MakeMlxRuntime(), req);
  ASSERT_TRUE(plans.ok()) << plans.status().ToString();
  EXPECT_EQ(Env((*plans)[0].workers(0))["CUDA_VISIBLE_DEVICES"], "0");
  EXPECT_EQ(Env((*plans)[0].workers(1))["CUDA_VISIBLE_DEVICES"], "4");
  EXPECT_EQ(Env((*plans)[0].workers(1))["MLX_WORLD_SIZE"], "2");
  EXPECT_EQ(NcclRankGpu(0, 1, 8), 0u);  // mlx.launch's default: one rank, GPU 0
  EXPECT_EQ(NcclRankGpu(3, 4, 4), 3u);
  EXPECT_EQ(NcclRankGpu(3, 4, 2), 1u);  // more ranks than GPUs: shared in blocks
  EXPECT_EQ(NcclRankGpu(0, 2, 0), 0u);
}

TEST(MlxRuntimeTest, NcclNeedsCudaOnEveryNode) {
  PlanRequest req = CudaNodes(2, 2, "1");
  req.nodes[1].topology = Topo(0, 8);  // a CPU-only node: auto falls back to the ring
  EXPECT_EQ(*ChooseMlxBackend(req), MlxBackend::kRing);
  req.annotations[std::string(kMlxBackendAnnotation)] = "nccl";
  auto r = LayoutAndRender(*MakeMlxRuntime(), req);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("nccl needs CUDA (NVIDIA) GPUs, and node node-2"));
  // AMD GPUs are not CUDA devices.
  req = CudaNodes(2, 2, "1");
  for (auto& g : *req.nodes[0].topology.mutable_gpus()) {
    g.set_vendor("amd");
    g.set_vendor_id(0x1002);
  }
  EXPECT_EQ(CudaGpus(req.nodes[0]), 0u);
  EXPECT_EQ(CudaGpus(req.nodes[1]), 2u);
  EXPECT_EQ(*ChooseMlxBackend(req), MlxBackend::kRing);
  // NCCL's port is never made up.
  req = CudaNodes(2, 2, "1");
  req.nodes[0].ports.clear();
  r = LayoutAndRender(*MakeMlxRuntime(), req);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("NCCL_PORT"));
  EXPECT_THAT(r.status().message(), HasSubstr("node-1"));
  // CUDA nodes with RDMA and one process each: nccl, where jaccl (macOS-only) cannot run.
  req = CudaNodes(2, 2, "1");
  for (auto& n : req.nodes) n.rdma_devices = {"mlx5_0"};
  EXPECT_EQ(*ChooseMlxBackend(req), MlxBackend::kNccl);
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
