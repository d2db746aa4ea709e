#include <gtest/gtest.h>

#include "common/trainjob/trainjob_model.h"
#include "tests/common/trainjob/test_util.h"

namespace trainlet::trainjob {
namespace {

TrainingRuntime TorchRuntime() {
  TrainingRuntime rt;
  rt.kind = "ClusterTrainingRuntime";
  rt.name = "torch-distributed";
  rt.ml_policy.framework = Framework::kTorch;
  rt.ml_policy.num_nodes = 2;
  ContainerSpec node;
  node.name = "node";
  node.image = "runtime-image";
  node.command = {"torchrun", "train.py"};
  node.args = {"--epochs", "1"};
  node.env = {{"A", "runtime-a"}, {"B", "runtime-b"}};
  rt.node = node;
  return rt;
}

TrainJob JobFor(const TrainingRuntime& rt) {
  TrainJob job;
  job.name = "x";
  job.runtime_ref.kind = rt.kind;
  job.runtime_ref.name = rt.name;
  return job;
}

TEST(ResolveTest, RuntimeSuppliesWhatTheJobLeavesOut) {
  TrainingRuntime rt = TorchRuntime();
  auto r = Resolve(JobFor(rt), rt);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->num_nodes, 2);
  EXPECT_EQ(r->num_proc_per_node, "1");
  EXPECT_EQ(r->argv, (std::vector<std::string>{"torchrun", "train.py", "--epochs", "1"}));
  EXPECT_EQ(r->env, rt.node->env);
  EXPECT_EQ(r->image, "runtime-image");
}

TEST(ResolveTest, JobWins) {
  TrainingRuntime rt = TorchRuntime();
  TrainJob job = JobFor(rt);
  job.trainer.num_nodes = 5;
  job.trainer.num_proc_per_node = "4";
  job.trainer.command = {"python3", "mine.py"};
  job.trainer.env = {{"B", "job-b"}, {"C", "job-c"}};
  job.trainer.image = "job-image";
  auto r = Resolve(job, rt);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->num_nodes, 5);
  EXPECT_EQ(r->num_proc_per_node, "4");
  // command from the job, args still from the runtime: each is overridden on its own.
  EXPECT_EQ(r->argv, (std::vector<std::string>{"python3", "mine.py", "--epochs", "1"}));
  EXPECT_EQ(r->env, (std::vector<EnvVar>{{"A", "runtime-a"}, {"B", "job-b"}, {"C", "job-c"}}));
  EXPECT_EQ(r->image, "job-image");

  job.trainer.args = {"--fast"};
  EXPECT_EQ(Resolve(job, rt)->argv, (std::vector<std::string>{"python3", "mine.py", "--fast"}));
}

TEST(ResolveTest, DefaultsWhenNeitherSetsNumbers) {
  TrainingRuntime rt = TorchRuntime();
  rt.ml_policy.num_nodes.reset();
  rt.ml_policy.num_proc_per_node = "8";
  auto r = Resolve(JobFor(rt), rt);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->num_nodes, 1);
  EXPECT_EQ(r->num_proc_per_node, "8");
}

TEST(ResolveTest, MissingCommand) {
  TrainingRuntime rt = TorchRuntime();
  rt.node->command.clear();
  auto r = Resolve(JobFor(rt), rt);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "TrainJob/x: spec.trainer.command: no command: neither the TrainJob nor runtime "
            "ClusterTrainingRuntime/torch-distributed sets one");
  rt.node.reset();
  EXPECT_FALSE(Resolve(JobFor(rt), rt).ok());
}

TEST(ResolveTest, ZeroNodesAndWrongRuntime) {
  TrainingRuntime rt = TorchRuntime();
  TrainJob job = JobFor(rt);
  job.trainer.num_nodes = 0;
  auto r = Resolve(job, rt);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "TrainJob/x: spec.trainer.numNodes: must be at least 1, got 0");

  job = JobFor(rt);
  job.runtime_ref.kind = "TrainingRuntime";
  auto wrong = Resolve(job, rt);
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("spec.runtimeRef"), std::string::npos);
}

TEST(ResolveTest, MpiUsesTheLauncherContainerNotSshd) {
  TrainingRuntime rt;
  rt.kind = "ClusterTrainingRuntime";
  rt.name = "mlx-distributed";
  rt.ml_policy.framework = Framework::kMpi;
  rt.ml_policy.mpi = MpiPolicy{};
  rt.ml_policy.num_proc_per_node = "1";
  rt.node = ContainerSpec{"node", "mlx", {"/usr/sbin/sshd"}, {"-De"}, {}};
  rt.launcher = ContainerSpec{"node", "mlx", {}, {}, {{"L", "1"}}};
  TrainJob job = JobFor(rt);
  EXPECT_FALSE(Resolve(job, rt).ok());  // the sshd command is never borrowed
  job.trainer.command = {"mpirun", "python3", "train.py"};
  auto r = Resolve(job, rt);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->argv, job.trainer.command);
  EXPECT_EQ(r->env, (std::vector<EnvVar>{{"L", "1"}}));
}

TEST(ResolveTest, KubeflowFilesResolve) {
  if (!std::filesystem::is_directory(testing::KubeflowDir())) GTEST_SKIP();
  auto rt =
      ParseDocuments(testing::ReadFile(testing::KubeflowDir() / "runtimes/torch_distributed.yaml"));
  auto job =
      ParseDocuments(testing::ReadFile(testing::KubeflowDir() / "examples/01-multi-node.yaml"));
  ASSERT_TRUE(rt.ok() && job.ok());
  auto r = Resolve(job->jobs.at(0), rt->runtimes.at(0));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->num_nodes, 3);
  EXPECT_EQ(r->argv.at(0), "torchrun");
  EXPECT_EQ(r->image, "pytorch/pytorch:2.13.0-cuda13.0-cudnn9-runtime");
}

}  // namespace
}  // namespace trainlet::trainjob
