// The jax and xgboost runtime plugins: env contracts for several layouts, reserved ports, errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "plugins/runtime/jax/jax_runtime.h"
#include "plugins/runtime/worker_env.h"
#include "plugins/runtime/xgboost/xgboost_runtime.h"
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

TEST(JaxRuntimeTest, EnvContract) {
  auto plugin = MakeJaxRuntime();
  EXPECT_EQ(plugin->name(), "jax");
  for (uint32_t nodes : {1u, 2u, 5u}) {
    for (uint32_t per_node : {1u, 4u}) {
      PlanRequest req =
          MakeRequest(nodes, per_node == 1 ? "" : std::to_string(per_node), {"python3", "j.py"});
      EXPECT_EQ(PortsPerNode(*plugin, req, 0), 1u);
      if (nodes > 1) EXPECT_EQ(PortsPerNode(*plugin, req, 1), 0u);
      auto plans = LayoutAndRender(*plugin, req);
      ASSERT_TRUE(plans.ok()) << plans.status().ToString();
      ASSERT_EQ(plans->size(), nodes);
      for (uint32_t n = 0; n < nodes; ++n) {
        ASSERT_EQ((*plans)[n].workers_size(), static_cast<int>(per_node));
        for (uint32_t l = 0; l < per_node; ++l) {
          auto env = Env((*plans)[n].workers(static_cast<int>(l)));
          EXPECT_EQ(env["JAX_COORDINATOR_ADDRESS"], "10.0.0.1:30000");
          EXPECT_EQ(env["JAX_NUM_PROCESSES"], std::to_string(nodes * per_node));
          EXPECT_EQ(env["JAX_PROCESS_ID"], std::to_string(n * per_node + l));
          EXPECT_EQ(env["TRAINLET_RANK"], env["JAX_PROCESS_ID"]);
        }
      }
    }
  }
}

TEST(JaxRuntimeTest, OneProcessPerNodeByDefaultAndForAuto) {
  auto plugin = MakeJaxRuntime();
  const v1::Topology topo = Topo(8, 64);
  EXPECT_EQ(*plugin->ProcsPerNode("", nullptr), 1u);
  EXPECT_EQ(*plugin->ProcsPerNode("auto", &topo), 1u);
  auto r = plugin->ProcsPerNode("0", nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("spec.trainer.numProcPerNode"));
}

TEST(JaxRuntimeTest, MissingPortAndCommand) {
  auto plugin = MakeJaxRuntime();
  auto r = LayoutAndRender(*plugin, MakeRequest(2, "1", {"j"}, 0));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kInvalid);
  EXPECT_THAT(r.status().message(), HasSubstr("JAX_COORDINATOR_ADDRESS"));
  r = LayoutAndRender(*plugin, MakeRequest(2, "1", {}));
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("spec.trainer.command"));
}

TEST(JaxRuntimeTest, Ipv6CoordinatorInBrackets) {
  PlanRequest req = MakeRequest(1, "1", {"j"});
  req.nodes[0].address = "fd00::7";
  auto plans = LayoutAndRender(*MakeJaxRuntime(), req);
  ASSERT_TRUE(plans.ok());
  EXPECT_EQ(Env((*plans)[0].workers(0))["JAX_COORDINATOR_ADDRESS"], "[fd00::7]:30000");
}

TEST(XgboostRuntimeTest, EnvContractKubeflowCpuCase) {
  auto plugin = MakeXgboostRuntime();
  EXPECT_EQ(plugin->name(), "xgboost");
  PlanRequest req = MakeRequest(4, "", {"python3", "x.py"});
  EXPECT_EQ(PortsPerNode(*plugin, req, 0), 1u);
  EXPECT_EQ(PortsPerNode(*plugin, req, 3), 0u);
  auto plans = LayoutAndRender(*plugin, req);
  ASSERT_TRUE(plans.ok()) << plans.status().ToString();
  ASSERT_EQ(plans->size(), 4u);
  for (uint32_t n = 0; n < 4; ++n) {
    ASSERT_EQ((*plans)[n].workers_size(), 1);
    auto env = Env((*plans)[n].workers(0));
    EXPECT_EQ(env["DMLC_TRACKER_URI"], "10.0.0.1");
    EXPECT_EQ(env["DMLC_TRACKER_PORT"], "30000");
    EXPECT_EQ(env["DMLC_TASK_ID"], std::to_string(n));  // the node's index, as in Kubeflow
    EXPECT_EQ(env["DMLC_NUM_WORKER"], "4");
  }
}

TEST(XgboostRuntimeTest, SeveralWorkersPerNode) {
  auto plugin = MakeXgboostRuntime();
  PlanRequest req = MakeRequest(2, "auto", {"x"});
  req.nodes[0].topology = Topo(4, 32);
  req.nodes[1].topology = Topo(4, 32);
  auto plans = LayoutAndRender(*plugin, req);
  ASSERT_TRUE(plans.ok()) << plans.status().ToString();
  ASSERT_EQ((*plans)[1].workers_size(), 4);
  auto env = Env((*plans)[1].workers(3));
  EXPECT_EQ(env["DMLC_TASK_ID"], "7");
  EXPECT_EQ(env["DMLC_NUM_WORKER"], "8");  // nodes x GPUs, as Kubeflow counts it
  const v1::Topology cpu = Topo(0, 32);
  EXPECT_EQ(*plugin->ProcsPerNode("auto", &cpu), 1u);
  EXPECT_EQ(*plugin->ProcsPerNode("3", nullptr), 3u);
}

TEST(XgboostRuntimeTest, ReservedEnvIsRefused) {
  auto plugin = MakeXgboostRuntime();
  for (const char* name :
       {"DMLC_TRACKER_URI", "DMLC_TRACKER_PORT", "DMLC_TASK_ID", "DMLC_NUM_WORKER"}) {
    PlanRequest req = MakeRequest(2, "1", {"x"});
    req.env = {{"OK", "1"}, {name, "custom"}};
    auto r = LayoutAndRender(*plugin, req);
    ASSERT_FALSE(r.ok()) << name;
    EXPECT_EQ(r.status().code(), ErrorCode::kInvalid);
    EXPECT_THAT(r.status().message(), HasSubstr("spec.trainer.env"));
    EXPECT_THAT(r.status().message(), HasSubstr(name));
  }
}

TEST(XgboostRuntimeTest, MissingPort) {
  auto r = LayoutAndRender(*MakeXgboostRuntime(), MakeRequest(2, "1", {"x"}, 0));
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("DMLC_TRACKER_PORT"));
}

TEST(WorkerEnvHelpersTest, HostPortAndReservedPort) {
  EXPECT_EQ(HostPort("10.1.2.3", 80), "10.1.2.3:80");
  EXPECT_EQ(HostPort("::1", 80), "[::1]:80");
  EXPECT_EQ(HostPort("[::1]", 80), "[::1]:80");
  EXPECT_EQ(HostPort("host-a", 1), "host-a:1");
  PlanRequest req = MakeRequest(2, "1", {"x"}, 2);
  EXPECT_EQ(*ReservedPort(req, 1, 1, "X"), 30101u);
  auto r = ReservedPort(req, 1, 2, "MY_PORT");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("MY_PORT"));
  EXPECT_THAT(r.status().message(), HasSubstr("node-2"));
  EXPECT_FALSE(ReservedPort(req, 2, 0, "X").ok());
  req.nodes[0].ports = {0};  // 0 is never a port
  EXPECT_FALSE(ReservedPort(req, 0, 0, "X").ok());
}

TEST(WorkerEnvHelpersTest, AutoProcsAndLayout) {
  EXPECT_EQ(AutoProcsPerNode(Topo(2, 96)), 2u);
  EXPECT_EQ(AutoProcsPerNode(Topo(0, 96)), 96u);
  EXPECT_EQ(AutoProcsPerNode(v1::Topology()), 1u);
  const RankLayout l = LayOutRanks({2, 3, 1});
  EXPECT_EQ(l.world_size, 6u);
  EXPECT_EQ(l.first_rank, (std::vector<uint32_t>{0, 2, 5}));
}

}  // namespace
}  // namespace trainlet
