// MPI direct launch in the mpi plugin (plugins/runtime/mpi/mpi_direct_launch.h): selection, the
// ranks on every node, the job map, and what describe says.
#include "plugins/runtime/mpi/mpi_direct_launch.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/pmix/pmix_job_map.h"
#include "plugins/runtime/mpi/mpi_runtime.h"
#include "runtime_test_util.h"

namespace trainlet {
namespace {

using testing_util::Env;
using testing_util::LayoutAndRender;
using testing_util::MakeRequest;
using testing_util::WithoutPorts;

PlanRequest DirectRequest(uint32_t nodes) {
  PlanRequest req = MakeRequest(nodes, "2", {"./allreduce", "--size", "8"}, 0);
  req.annotations[std::string(kMpiLaunchAnnotation)] = "direct";
  return req;
}

TEST(MpiDirectLaunchTest, SelectedByAnnotationOrRuntimeLabel) {
  PlanRequest req = MakeRequest(2, "2", {"mpirun", "./a"}, 0);
  EXPECT_FALSE(*WantsDirectLaunch(req));
  req.labels[std::string(kMpiLaunchAnnotation)] = "Direct";
  EXPECT_TRUE(*WantsDirectLaunch(req));
  req.annotations[std::string(kMpiLaunchAnnotation)] = "mpirun";  // the job's annotation wins
  EXPECT_FALSE(*WantsDirectLaunch(req));
  req.annotations[std::string(kMpiLaunchAnnotation)] = "srun";
  auto bad = WantsDirectLaunch(req);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(),
              ::testing::HasSubstr("metadata.annotations[trainlet.io/mpi-launch]: must be direct "
                                   "or mpirun, got \"srun\""));
}

// Without the annotation or label: direct launch where the command is the MPI program itself;
// mpirun where it starts a launcher, or a shell or script that may hide one.
TEST(MpiDirectLaunchTest, DefaultWhereTheCommandNeedsNoLauncher) {
  EXPECT_TRUE(*WantsDirectLaunch(MakeRequest(2, "2", {"/opt/bin/allreduce"}, 0)));
  EXPECT_TRUE(*WantsDirectLaunch(MakeRequest(2, "2", {"python3", "train.py", "--lr=0.1"}, 0)));
  for (const std::vector<std::string>& argv :
       std::vector<std::vector<std::string>>{{"mpirun", "-np", "6", "./a"},
                                             {"/usr/bin/mpirun.openmpi", "./a"},
                                             {"mpiexec", "./a"},
                                             {"mpirun.mpich", "./a"},
                                             {"env", "OMPI_MCA_pml=ob1", "mpirun", "./a"},
                                             {"horovodrun", "-np", "4", "python3", "t.py"},
                                             {"deepspeed", "train.py"},
                                             {"sh", "-c", "python3 t.py"},
                                             {"/bin/bash", "-lc", "X=1 mpirun ./a"},
                                             {"./run.sh"},
                                             {"python3", "t.py", "--launcher=mpirun"}}) {
    EXPECT_TRUE(CommandNeedsLauncher(argv)) << argv[0];
    EXPECT_FALSE(*WantsDirectLaunch(MakeRequest(2, "2", argv, 0))) << argv[0];
  }
  EXPECT_FALSE(CommandNeedsLauncher({"./allreduce", "--size", "8"}));
  EXPECT_FALSE(CommandNeedsLauncher({}));
  // mpirun asked for explicitly keeps mpirun for a plain program.
  PlanRequest req = MakeRequest(2, "2", {"./allreduce"}, 0);
  req.annotations[std::string(kMpiLaunchAnnotation)] = "mpirun";
  EXPECT_FALSE(*WantsDirectLaunch(req));
  // MPICH and Intel start through hydra: the default is no error, just mpirun.
  req.annotations = {{std::string(kMpiImplementationAnnotation), "MPICH"}};
  EXPECT_FALSE(*WantsDirectLaunch(req));
  // describe says the choice was the command's, and how to have mpirun instead.
  EXPECT_THAT(MakeMpiRuntime()->LaunchMode(MakeRequest(2, "2", {"./allreduce"}, 0)),
              ::testing::AllOf(::testing::HasSubstr("ranks started directly, PMIx"),
                               ::testing::HasSubstr("trainlet.io/mpi-launch: mpirun")));
}

TEST(MpiDirectLaunchTest, RefusedForHydraImplementations) {
  PlanRequest req = DirectRequest(2);
  req.annotations[std::string(kMpiImplementationAnnotation)] = "MPICH";
  auto layout = MakeMpiRuntime()->Layout(WithoutPorts(req));
  ASSERT_FALSE(layout.ok());
  EXPECT_THAT(layout.status().message(), ::testing::HasSubstr("starts through hydra"));
}

TEST(MpiDirectLaunchTest, EveryNodeRunsItsRanksOfTheCommandItself) {
  PlanRequest req = DirectRequest(3);
  auto layout = MakeMpiRuntime()->Layout(WithoutPorts(req));
  ASSERT_TRUE(layout.ok()) << layout.status().ToString();
  EXPECT_FALSE(layout->exec_launcher_rank.has_value());  // no trainlet-exec, no launcher keys
  auto plans = LayoutAndRender(*MakeMpiRuntime(), req);
  ASSERT_TRUE(plans.ok()) << plans.status().ToString();
  ASSERT_EQ(plans->size(), 3u);
  for (uint32_t n = 0; n < 3; ++n) {
    const v1::LaunchPlan& plan = (*plans)[n];
    ASSERT_EQ(plan.workers_size(), 2);
    ASSERT_EQ(plan.files_size(), 1);
    EXPECT_EQ(plan.files(0).path(), "pmix-job-map");
    for (uint32_t local = 0; local < 2; ++local) {
      const auto& w = plan.workers(static_cast<int>(local));
      EXPECT_THAT(std::vector<std::string>(w.argv().begin(), w.argv().end()),
                  ::testing::ElementsAre("./allreduce", "--size", "8"));
      auto env = Env(w);
      EXPECT_EQ(env["TRAINLET_RANK"], std::to_string(n * 2 + local));
      EXPECT_EQ(env["TRAINLET_PMIX_JOB_MAP"], "$(TRAINLET_WORK_DIR)/pmix-job-map");
      EXPECT_EQ(env["OMPI_MCA_pml"], "ob1");
      EXPECT_EQ(env["OMPI_MCA_btl_tcp_if_include"], "10.0.0.0/30");
      EXPECT_EQ(env.count("OMPI_MCA_plm_rsh_agent"), 0u);  // nothing of mpirun's
      // what makes OpenMPI 4.1 a PMIx client rather than a singleton
      EXPECT_FALSE(env["OMPI_MCA_orte_local_daemon_uri"].empty());
    }
  }
  auto map = pmix::DecodeJobMap((*plans)[1].files(0).content());
  ASSERT_TRUE(map.ok()) << map.status().ToString();
  EXPECT_EQ(map->nspace, "trainlet.job.2");
  EXPECT_EQ(pmix::NodeListText(*map), "host1,host2,host3");
  EXPECT_EQ(pmix::ProcMapText(*map), "0,1;2,3;4,5");
}

TEST(MpiDirectLaunchTest, TrainerEnvWinsOverTheDefaults) {
  PlanRequest req = DirectRequest(2);
  req.env = {{"OMPI_MCA_pml", "ucx"}, {"OMPI_MCA_btl_tcp_if_include", "eth1"}};
  auto plans = LayoutAndRender(*MakeMpiRuntime(), req);
  ASSERT_TRUE(plans.ok()) << plans.status().ToString();
  auto env = Env((*plans)[1].workers(0));
  EXPECT_EQ(env["OMPI_MCA_pml"], "ucx");
  EXPECT_EQ(env["OMPI_MCA_btl_tcp_if_include"], "eth1");
}

TEST(MpiDirectLaunchTest, DescribeSaysRanksStartDirectly) {
  EXPECT_THAT(MakeMpiRuntime()->LaunchMode(DirectRequest(2)),
              ::testing::HasSubstr("ranks started directly, PMIx"));
  EXPECT_THAT(MakeMpiRuntime()->LaunchMode(MakeRequest(2, "2", {"mpirun"}, 0)),
              ::testing::HasSubstr("through trainlet-exec"));
}

}  // namespace
}  // namespace trainlet
