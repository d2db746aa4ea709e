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

// OpenMPI leaves binding to trainlet's CPU sets: the launcher and daemons run inside the job's
// CPUs and the ranks inherit them (OpenMPI 4.1's own default binds every node's first rank to
// core 0). The trainer's own choice wins (issue 19, defect 11).
TEST(MpiRuntimeTest, OpenMpiBindingIsLeftToTrainletsCpuSets) {
  PlanRequest req = MpiRequest(2);
  auto env = LauncherEnv(req);
  EXPECT_EQ(env["OMPI_MCA_hwloc_base_binding_policy"], "none");
  EXPECT_EQ(env["PRTE_MCA_hwloc_default_binding_policy"], "none");
  req.env = {{"OMPI_MCA_hwloc_base_binding_policy", "core"}};
  env = LauncherEnv(req);
  EXPECT_EQ(env["OMPI_MCA_hwloc_base_binding_policy"], "core");
  EXPECT_EQ(env.count("PRTE_MCA_hwloc_default_binding_policy"), 0u);
  req.env.clear();
  req.argv = {"mpirun", "--bind-to", "core", "./allreduce"};
  EXPECT_EQ(LauncherEnv(req).count("OMPI_MCA_hwloc_base_binding_policy"), 0u);
  req.argv = {"sh", "-c", "mpirun --mca hwloc_base_binding_policy socket ./allreduce"};
  EXPECT_EQ(LauncherEnv(req).count("OMPI_MCA_hwloc_base_binding_policy"), 0u);
}

// OpenMPI's TCP (the tcp BTL between ranks, the oob between mpirun and its daemons) is kept on
// the agents' network: the smallest one that holds every advertised address, so an interface
// that comes and goes elsewhere on a node is never bound (issue 19, defect 12).
TEST(MpiRuntimeTest, AdvertisedAddressesNarrowOpenMpiTcp) {
  PlanRequest req = MpiRequest(3);  // 10.0.0.1, 10.0.0.2, 10.0.0.3
  EXPECT_EQ(AdvertisedNetwork(req.nodes), std::optional<std::string>("10.0.0.0/30"));
  auto env = LauncherEnv(req);
  EXPECT_EQ(env["OMPI_MCA_btl_tcp_if_include"], "10.0.0.0/30");
  EXPECT_EQ(env["OMPI_MCA_oob_tcp_if_include"], "10.0.0.0/30");
  // Never an exclude as well: OpenMPI refuses include and exclude set together.
  EXPECT_EQ(env.count("OMPI_MCA_btl_tcp_if_exclude"), 0u);
  EXPECT_EQ(env.count("OMPI_MCA_oob_tcp_if_exclude"), 0u);
}

TEST(MpiRuntimeTest, AdvertisedNetworkIsTheSmallestThatHoldsEveryAddress) {
  PlanRequest req = MpiRequest(3);
  req.nodes[0].address = "192.168.7.9";
  req.nodes[1].address = "192.168.7.14";
  req.nodes[2].address = "192.168.7.12";
  EXPECT_EQ(AdvertisedNetwork(req.nodes), std::optional<std::string>("192.168.7.8/29"));
  req.nodes[2].address = "192.168.6.200";
  EXPECT_EQ(AdvertisedNetwork(req.nodes), std::optional<std::string>("192.168.6.0/23"));
  req.nodes[2].address = "192.200.0.1";
  EXPECT_EQ(AdvertisedNetwork(req.nodes), std::optional<std::string>("192.128.0.0/9"));
  // Nodes in unrelated networks: wider than a /8 narrows nothing worth having.
  req.nodes[2].address = "10.0.0.1";
  EXPECT_EQ(AdvertisedNetwork(req.nodes), std::nullopt);
  EXPECT_EQ(LauncherEnv(req).count("OMPI_MCA_oob_tcp_if_include"), 0u);
}

TEST(MpiRuntimeTest, AdvertisedNetworkIsNeverAHostPrefix) {
  // OpenMPI 4.1 computes the netmask of /32 as 0 on x86 (1 << 32), so "A.B.C.D/32" would select
  // every interface of every node: exactly what the narrowing is for. One node, or several
  // agents of one host, get the /31 that holds their address.
  PlanRequest req = MpiRequest(1);
  EXPECT_EQ(AdvertisedNetwork(req.nodes), std::optional<std::string>("10.0.0.0/31"));
  req = MpiRequest(2);
  req.nodes[0].address = req.nodes[1].address = "172.16.5.255";
  EXPECT_EQ(AdvertisedNetwork(req.nodes), std::optional<std::string>("172.16.5.254/31"));
}

TEST(MpiRuntimeTest, LoopbackClusterNarrowsToTheLoopbackNetwork) {
  // A local cluster (trainletctl local up, the loopback mode of the namespace tests): agents on
  // 127.0.0.x aliases, which Linux answers on lo without an address of their own, so only the
  // whole loopback network matches lo's 127.0.0.1.
  PlanRequest req = MpiRequest(3);
  for (uint32_t i = 0; i < 3; ++i) req.nodes[i].address = "127.0.0." + std::to_string(i + 2);
  EXPECT_EQ(AdvertisedNetwork(req.nodes), std::optional<std::string>("127.0.0.0/8"));
  auto env = LauncherEnv(req);
  EXPECT_EQ(env["OMPI_MCA_btl_tcp_if_include"], "127.0.0.0/8");
  EXPECT_EQ(env["OMPI_MCA_oob_tcp_if_include"], "127.0.0.0/8");
}

TEST(MpiRuntimeTest, AddressesOpenMpiCannotMatchLeaveTcpUnnarrowed) {
  // OpenMPI 4.1 resolves only IPv4 CIDRs in if_include, and a host name is no CIDR: narrowing
  // the other nodes alone would cut this one off, so nothing is set.
  for (const char* address : {"fd00::2", "node-2.example.com", "10.0.0.300", "", "127.0.0.1"}) {
    PlanRequest req = MpiRequest(3);
    req.nodes[1].address = address;  // 127.0.0.1 next to 10.0.0.x: no network holds both
    EXPECT_EQ(AdvertisedNetwork(req.nodes), std::nullopt) << address;
    auto env = LauncherEnv(req);
    EXPECT_EQ(env.count("OMPI_MCA_btl_tcp_if_include"), 0u) << address;
    EXPECT_EQ(env.count("OMPI_MCA_oob_tcp_if_include"), 0u) << address;
  }
}

TEST(MpiRuntimeTest, TrainerIncludeWinsForItsParameterOnly) {
  PlanRequest req = MpiRequest(2);
  req.env = {{"OMPI_MCA_btl_tcp_if_include", "eth1"}};
  auto env = LauncherEnv(req);
  EXPECT_EQ(env["OMPI_MCA_btl_tcp_if_include"], "eth1");
  EXPECT_EQ(env["OMPI_MCA_oob_tcp_if_include"], "10.0.0.0/30");
}

TEST(MpiRuntimeTest, TrainerExcludeLeavesOurIncludeOut) {
  // include and exclude are mutually exclusive in OpenMPI: adding ours next to the trainer's
  // exclude would make the tcp BTL (or the oob) refuse to open.
  PlanRequest req = MpiRequest(2);
  req.env = {{"OMPI_MCA_oob_tcp_if_exclude", "docker0"}};
  auto env = LauncherEnv(req);
  EXPECT_EQ(env.count("OMPI_MCA_oob_tcp_if_include"), 0u);
  EXPECT_EQ(env["OMPI_MCA_oob_tcp_if_exclude"], "docker0");
  EXPECT_EQ(env["OMPI_MCA_btl_tcp_if_include"], "10.0.0.0/30");

  req.env = {{"OMPI_MCA_btl_tcp_if_exclude", "127.0.0.1/8,sppp"}};
  env = LauncherEnv(req);
  EXPECT_EQ(env.count("OMPI_MCA_btl_tcp_if_include"), 0u);
  EXPECT_EQ(env["OMPI_MCA_oob_tcp_if_include"], "10.0.0.0/30");
}

TEST(MpiRuntimeTest, MpirunCommandLineParameterLeavesOurIncludeOut) {
  // `mpirun --mca btl_tcp_if_exclude ...` outranks the env, but would still clash with our
  // include; so would the same words in a shell command that runs mpirun.
  PlanRequest req = MpiRequest(2);
  req.argv = {"mpirun", "--mca", "btl_tcp_if_exclude", "eth1", "./allreduce"};
  auto env = LauncherEnv(req);
  EXPECT_EQ(env.count("OMPI_MCA_btl_tcp_if_include"), 0u);
  EXPECT_EQ(env["OMPI_MCA_oob_tcp_if_include"], "10.0.0.0/30");
  req.argv = {"sh", "-c", "mpirun -mca oob_tcp_if_include ib0 ./allreduce"};
  env = LauncherEnv(req);
  EXPECT_EQ(env.count("OMPI_MCA_oob_tcp_if_include"), 0u);
  EXPECT_EQ(env["OMPI_MCA_btl_tcp_if_include"], "10.0.0.0/30");
  req.argv = {"sh", "-c", "OMPI_MCA_btl_tcp_if_exclude=lo,docker0 mpirun ./allreduce"};
  EXPECT_EQ(LauncherEnv(req).count("OMPI_MCA_btl_tcp_if_include"), 0u);
  // A command that only mentions the name sets nothing.
  req.argv = {"mpirun", "sh", "-c",
              "echo $OMPI_MCA_btl_tcp_if_include $OMPI_MCA_oob_tcp_if_include"};
  env = LauncherEnv(req);
  EXPECT_EQ(env["OMPI_MCA_btl_tcp_if_include"], "10.0.0.0/30");
  EXPECT_EQ(env["OMPI_MCA_oob_tcp_if_include"], "10.0.0.0/30");
}

TEST(MpiRuntimeTest, RdmaNodesStillNarrowTheOob) {
  // The oob (mpirun to its daemons) is TCP whatever the PML; the tcp BTL stays a fallback.
  PlanRequest req = MpiRequest(2);
  req.nodes[1].rdma_devices = {"mlx5_0"};
  auto env = LauncherEnv(req);
  EXPECT_EQ(env["OMPI_MCA_oob_tcp_if_include"], "10.0.0.0/30");
  EXPECT_EQ(env["OMPI_MCA_btl_tcp_if_include"], "10.0.0.0/30");
}

// The launcher env without the TRAINLET_* variables every worker gets.
std::map<std::string, std::string> MpiEnvOnly(std::map<std::string, std::string> env) {
  std::erase_if(env, [](const auto& e) { return e.first.rfind("TRAINLET_", 0) == 0; });
  return env;
}

PlanRequest HydraRequest(const std::string& implementation) {
  PlanRequest req = MpiRequest(3);
  req.argv = {"mpirun.mpich", "-np", "6", "./allreduce"};
  req.annotations[std::string(kMpiImplementationAnnotation)] = implementation;
  return req;
}

TEST(MpiRuntimeTest, MpichRunsHydraThroughTrainletExec) {
  auto plans = LayoutAndRender(*MakeMpiRuntime(), HydraRequest("MPICH"));
  ASSERT_TRUE(plans.ok()) << plans.status().ToString();
  ASSERT_EQ(plans->size(), 3u);
  EXPECT_EQ((*plans)[1].workers_size(), 0);  // hydra starts its proxies there through exec
  EXPECT_EQ((*plans)[2].workers_size(), 0);
  ASSERT_EQ((*plans)[0].files_size(), 1);
  EXPECT_EQ((*plans)[0].files(0).path(), "hostfile");
  EXPECT_EQ((*plans)[0].files(0).content(), "10.0.0.1:2\n10.0.0.2:2\n10.0.0.3:2\n");
  ASSERT_EQ((*plans)[0].workers_size(), 1);
  EXPECT_EQ(testing_util::Argv((*plans)[0].workers(0)),
            (std::vector<std::string>{"mpirun.mpich", "-np", "6", "./allreduce"}));
  auto env = Env((*plans)[0].workers(0));
  // Exactly hydra's settings: nothing of OpenMPI's (no OMPI_MCA_pml=ob1 narrowing either).
  EXPECT_EQ(MpiEnvOnly(env), (std::map<std::string, std::string>{
                                 {"HYDRA_HOST_FILE", "$(TRAINLET_WORK_DIR)/hostfile"},
                                 {"HYDRA_LAUNCHER", "rsh"},
                                 {"HYDRA_LAUNCHER_EXEC", "$(TRAINLET_EXEC)"},
                             }));
  EXPECT_EQ(env["TRAINLET_MPI_HOSTFILE"], "$(TRAINLET_WORK_DIR)/hostfile");
  EXPECT_EQ(env["TRAINLET_WORLD_SIZE"], "6");
  EXPECT_EQ(env.count("TRAINLET_EXEC_KEY"), 0u);  // the coordinator adds the credentials
  auto layout = MakeMpiRuntime()->Layout(WithoutPorts(HydraRequest("MPICH")));
  ASSERT_TRUE(layout.ok()) << layout.status().ToString();
  EXPECT_EQ(layout->exec_launcher_rank, std::optional<uint32_t>(0));
  EXPECT_THAT(MakeMpiRuntime()->LaunchMode(HydraRequest("MPICH")),
              ::testing::HasSubstr("MPICH hydra proxies started through trainlet-exec, no SSH"));
}

TEST(MpiRuntimeTest, IntelRunsHydraWithItsOwnNames) {
  auto plans = LayoutAndRender(*MakeMpiRuntime(), HydraRequest("Intel"));
  ASSERT_TRUE(plans.ok()) << plans.status().ToString();
  EXPECT_EQ((*plans)[0].files(0).content(), "10.0.0.1:2\n10.0.0.2:2\n10.0.0.3:2\n");
  EXPECT_EQ(MpiEnvOnly(Env((*plans)[0].workers(0))),
            (std::map<std::string, std::string>{
                {"I_MPI_HYDRA_HOST_FILE", "$(TRAINLET_WORK_DIR)/hostfile"},
                {"I_MPI_HYDRA_BOOTSTRAP", "rsh"},
                {"I_MPI_HYDRA_BOOTSTRAP_EXEC", "$(TRAINLET_EXEC)"},
                {"I_MPI_PERHOST", "2"},
            }));
  EXPECT_THAT(MakeMpiRuntime()->LaunchMode(HydraRequest("Intel")),
              ::testing::HasSubstr("Intel hydra proxies"));
}

TEST(MpiRuntimeTest, TrainerEnvCannotTakeHydraOffTrainletExec) {
  PlanRequest req = HydraRequest("MPICH");
  req.env = {{"HYDRA_LAUNCHER", "ssh"}, {"HYDRA_LAUNCHER_EXEC", "/usr/bin/ssh"}, {"X", "1"}};
  auto env = LauncherEnv(req);
  EXPECT_EQ(env["HYDRA_LAUNCHER"], "rsh");
  EXPECT_EQ(env["HYDRA_LAUNCHER_EXEC"], "$(TRAINLET_EXEC)");
  EXPECT_EQ(env["X"], "1");
}

TEST(MpiRuntimeTest, ImplementationAnnotation) {
  PlanRequest req = MpiRequest(2);
  EXPECT_EQ(*ChooseMpiImplementation(req), MpiImplementation::kOpenMpi);  // unset
  for (const auto& [text, want] : std::vector<std::pair<std::string, MpiImplementation>>{
           {"", MpiImplementation::kOpenMpi},
           {"OpenMPI", MpiImplementation::kOpenMpi},
           {"MPICH", MpiImplementation::kMpich},
           {"mpich", MpiImplementation::kMpich},
           {"Intel", MpiImplementation::kIntel},
           {"INTEL", MpiImplementation::kIntel}}) {
    req.annotations[std::string(kMpiImplementationAnnotation)] = text;
    auto got = ChooseMpiImplementation(req);
    ASSERT_TRUE(got.ok()) << text;
    EXPECT_EQ(*got, want) << text;
  }
  // OpenMPI named explicitly plans exactly as before.
  req.annotations[std::string(kMpiImplementationAnnotation)] = "OpenMPI";
  auto env = LauncherEnv(req);
  EXPECT_EQ(env["OMPI_MCA_plm_rsh_agent"], "$(TRAINLET_EXEC)");
  EXPECT_EQ(env.count("HYDRA_LAUNCHER"), 0u);
  auto plans = LayoutAndRender(*MakeMpiRuntime(), req);
  ASSERT_TRUE(plans.ok());
  EXPECT_EQ((*plans)[0].files(0).content(), "10.0.0.1 slots=2\n10.0.0.2 slots=2\n");

  // A runtime's label of the same key, for every job of the runtime; the TrainJob's annotation
  // wins over it.
  req = MpiRequest(2);
  req.labels[std::string(kMpiImplementationAnnotation)] = "MPICH";
  EXPECT_EQ(*ChooseMpiImplementation(req), MpiImplementation::kMpich);
  req.annotations[std::string(kMpiImplementationAnnotation)] = "Intel";
  EXPECT_EQ(*ChooseMpiImplementation(req), MpiImplementation::kIntel);
  req.annotations.clear();
  req.labels[std::string(kMpiImplementationAnnotation)] = "LAM";
  EXPECT_THAT(ChooseMpiImplementation(req).status().message(),
              ::testing::HasSubstr("runtime metadata.labels[trainlet.io/mpi-implementation]"));
  req.labels.clear();

  for (const char* bad : {"MVAPICH", "open mpi", "MPICH2"}) {
    req.annotations[std::string(kMpiImplementationAnnotation)] = bad;
    auto layout = MakeMpiRuntime()->Layout(WithoutPorts(req));  // refused before placing
    ASSERT_FALSE(layout.ok()) << bad;
    EXPECT_THAT(layout.status().message(),
                ::testing::HasSubstr("metadata.annotations[trainlet.io/mpi-implementation]: must "
                                     "be OpenMPI, MPICH or Intel, got \"" +
                                     std::string(bad) + "\""));
  }
}

TEST(MpiRuntimeTest, HydraHostfileForm) {
  PlanRequest req = MakeRequest(2, "4", {"x"}, 0);
  req.nodes[1].address = "fd00::7";  // hydra splits at ':': the host name stands in
  EXPECT_EQ(HydraHostfile(req.nodes, 4), "10.0.0.1:4\nhost2:4\n");
}

}  // namespace
}  // namespace trainlet
