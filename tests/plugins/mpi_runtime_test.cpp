// The mpi runtime plugin: the launcher's plan (hostfile, rsh agent, credentials) and the MPI
// start-up defaults it chooses from what the placed nodes report.
#include "plugins/runtime/mpi/mpi_runtime.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "runtime_test_util.h"

namespace trainlet {
namespace {

using testing_util::Env;
using testing_util::LayoutAndRender;
using testing_util::MakeRequest;
using testing_util::WithoutPorts;

PlanRequest MpiRequest(uint32_t nodes) {
  PlanRequest req = MakeRequest(nodes, "2", {"mpirun", "-np", "6", "./allreduce"}, 0);
  req.exec_endpoint = "tcp://10.0.0.100:4000";
  req.exec_server_key = "server";
  req.launcher_public_key = "public";
  return req;
}

std::map<std::string, std::string> LauncherEnv(const PlanRequest& req) {
  auto plans = LayoutAndRender(*MakeMpiRuntime(), req);
  EXPECT_TRUE(plans.ok()) << plans.status().ToString();
  if (!plans.ok() || plans->empty() || (*plans)[0].workers_size() != 1) return {};
  return Env((*plans)[0].workers(0));
}

TEST(MpiRuntimeTest, LauncherOnNodeRankZeroOnly) {
  auto plans = LayoutAndRender(*MakeMpiRuntime(), MpiRequest(3));
  ASSERT_TRUE(plans.ok()) << plans.status().ToString();
  ASSERT_EQ(plans->size(), 3u);
  EXPECT_EQ((*plans)[0].workers_size(), 1);
  EXPECT_EQ((*plans)[1].workers_size(), 0);
  EXPECT_EQ((*plans)[2].workers_size(), 0);
  ASSERT_EQ((*plans)[0].files_size(), 1);
  EXPECT_EQ((*plans)[0].files(0).content(),
            "10.0.0.1 slots=2\n10.0.0.2 slots=2\n10.0.0.3 slots=2\n");
  auto env = Env((*plans)[0].workers(0));
  EXPECT_EQ(env["OMPI_MCA_plm_rsh_agent"], "$(TRAINLET_EXEC)");
  // The launcher's secret never passes through the plugin: the coordinator adds it, with the
  // rest of TRAINLET_EXEC_*, to the rank the layout names (tests/coordinator/attempt_plan_test).
  EXPECT_EQ(env.count("TRAINLET_EXEC_KEY"), 0u);
  auto layout = MakeMpiRuntime()->Layout(WithoutPorts(MpiRequest(3)));
  ASSERT_TRUE(layout.ok()) << layout.status().ToString();
  EXPECT_EQ(layout->exec_launcher_rank, std::optional<uint32_t>(0));
}

TEST(MpiRuntimeTest, TcpOnlyNodesGetTheOb1Pml) {
  auto env = LauncherEnv(MpiRequest(3));
  EXPECT_EQ(env["OMPI_MCA_pml"], "ob1");
}

TEST(MpiRuntimeTest, ReportedRdmaDevicesLeaveThePmlToOpenMpi) {
  PlanRequest req = MpiRequest(3);
  req.nodes[2].rdma_devices = {"mlx5_0"};  // one RDMA node is enough: UCX may be the right PML
  EXPECT_EQ(LauncherEnv(req).count("OMPI_MCA_pml"), 0u);
  EXPECT_TRUE(MpiTuningDefaults(req).empty());
}

TEST(MpiRuntimeTest, VerbsDeviceInTheTopologyLeavesThePmlToOpenMpi) {
  PlanRequest req = MpiRequest(2);
  req.nodes[1].topology.add_nics()->add_os_devices("hfi1_0");  // Omni-Path: psm2 via the cm PML
  EXPECT_EQ(LauncherEnv(req).count("OMPI_MCA_pml"), 0u);
  req = MpiRequest(2);
  req.nodes[0].topology.add_nics()->add_os_devices("eth0");  // an Ethernet NIC is not RDMA
  EXPECT_EQ(LauncherEnv(req)["OMPI_MCA_pml"], "ob1");
}

TEST(MpiRuntimeTest, TrainerEnvWinsOverTheDefault) {
  PlanRequest req = MpiRequest(2);
  req.env = {{"OMPI_MCA_pml", "ucx"}};
  EXPECT_EQ(LauncherEnv(req)["OMPI_MCA_pml"], "ucx");
}

}  // namespace
}  // namespace trainlet
