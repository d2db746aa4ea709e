// Every Kubeflow Trainer runtime and example must parse unchanged.

#include <gtest/gtest.h>

#include <algorithm>

#include "common/trainjob/trainjob_model.h"
#include "tests/common/trainjob/test_util.h"

namespace trainlet::trainjob {
namespace {

using testing::KubeflowDir;
using testing::ReadFile;

class ConformanceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::is_directory(KubeflowDir())) {
      GTEST_SKIP() << "no Kubeflow files at " << KubeflowDir();
    }
  }

  ParsedFile Parse(const std::string& relative) {
    std::string text = ReadFile(KubeflowDir() / relative);
    EXPECT_FALSE(text.empty()) << relative;
    auto parsed = ParseDocuments(text);
    EXPECT_TRUE(parsed.ok()) << relative << ": " << parsed.status().ToString();
    return parsed.ok() ? std::move(parsed).value() : ParsedFile{};
  }
};

bool HasWarning(const ParsedFile& f, const std::string& needle) {
  return std::any_of(f.warnings.begin(), f.warnings.end(),
                     [&](const std::string& w) { return w.find(needle) != std::string::npos; });
}

TEST_F(ConformanceTest, EveryFileParsesUnchanged) {
  int files = 0;
  for (const char* dir : {"runtimes", "examples"}) {
    for (const auto& entry : std::filesystem::directory_iterator(KubeflowDir() / dir)) {
      if (entry.path().extension() != ".yaml") continue;
      ++files;
      auto parsed = ParseDocuments(ReadFile(entry.path()));
      ASSERT_TRUE(parsed.ok()) << entry.path() << ": " << parsed.status().ToString();
      EXPECT_GE(parsed->jobs.size() + parsed->runtimes.size(), 1u) << entry.path();
      // What is stored must parse back to the same objects.
      for (const auto& rt : parsed->runtimes) {
        auto again = ParseDocuments(rt.yaml);
        ASSERT_TRUE(again.ok()) << entry.path() << ": " << again.status().ToString() << "\n"
                                << rt.yaml;
        ASSERT_EQ(again->runtimes.size(), 1u);
        EXPECT_EQ(again->runtimes[0].yaml, rt.yaml);
        EXPECT_EQ(again->runtimes[0].replicated_jobs, rt.replicated_jobs);
      }
      for (const auto& job : parsed->jobs) {
        auto again = ParseDocuments(job.yaml);
        ASSERT_TRUE(again.ok()) << entry.path() << ": " << again.status().ToString() << "\n"
                                << job.yaml;
        ASSERT_EQ(again->jobs.size(), 1u);
        EXPECT_EQ(again->jobs[0].trainer.command, job.trainer.command);
        EXPECT_EQ(again->jobs[0].trainer.resources_per_node, job.trainer.resources_per_node);
      }
    }
  }
  EXPECT_EQ(files, 14);
}

TEST_F(ConformanceTest, MultiNodeExample) {
  ParsedFile f = Parse("examples/01-multi-node.yaml");
  ASSERT_EQ(f.jobs.size(), 1u);
  EXPECT_TRUE(f.runtimes.empty());
  const TrainJob& job = f.jobs[0];
  EXPECT_EQ(job.name, "multi-node-example");
  EXPECT_EQ(job.trainer.num_nodes, 3);
  EXPECT_EQ(job.runtime_ref.name, "torch-distributed");
  EXPECT_EQ(job.runtime_ref.kind, "ClusterTrainingRuntime");
  EXPECT_EQ(job.runtime_ref.api_group, "trainer.kubeflow.org");
  ASSERT_EQ(job.trainer.command.size(), 5u);
  EXPECT_EQ(job.trainer.command[0], "torchrun");
  EXPECT_NE(job.trainer.command[4].find("dist.init_process_group"), std::string::npos);
  EXPECT_FALSE(job.suspend);

  ParsedFile rt = Parse("runtimes/torch_distributed.yaml");
  ASSERT_EQ(rt.runtimes.size(), 1u);
  EXPECT_EQ(rt.runtimes[0].name, "torch-distributed");
  EXPECT_EQ(rt.runtimes[0].ml_policy.framework, Framework::kTorch);
  EXPECT_STREQ(FrameworkName(rt.runtimes[0].ml_policy.framework), "torch");
  EXPECT_EQ(rt.runtimes[0].ml_policy.num_nodes, 1);
  ASSERT_TRUE(rt.runtimes[0].node.has_value());
  EXPECT_EQ(rt.runtimes[0].node->image, "pytorch/pytorch:2.13.0-cuda13.0-cudnn9-runtime");
  EXPECT_EQ(rt.runtimes[0].labels.at("trainer.kubeflow.org/framework"), "torch");
}

TEST_F(ConformanceTest, RuntimePatchesAreIgnoredWithAWarning) {
  ParsedFile f = Parse("examples/02-runtime-patches.yaml");
  ASSERT_EQ(f.jobs.size(), 1u);
  EXPECT_TRUE(HasWarning(f, "TrainJob/runtime-patches-example: spec.runtimePatches: ignored"))
      << ::testing::PrintToString(f.warnings);
  const TrainJob& job = f.jobs[0];
  ASSERT_EQ(job.trainer.env.size(), 2u);
  EXPECT_EQ(job.trainer.env[0], (EnvVar{"CUSTOM_VAR", "custom-value"}));
  EXPECT_EQ(job.trainer.env[1], (EnvVar{"PYTHONUNBUFFERED", "1"}));
  EXPECT_EQ(job.trainer.resources_per_node.at("cpu"), "2");
  EXPECT_EQ(job.trainer.resources_per_node.at("memory"), "4Gi");
}

// The queue label is trainlet's own since Kueue's API is (issue 14): read, not ignored.
TEST_F(ConformanceTest, KueueExampleIsSuspendedAndNamesItsQueue) {
  ParsedFile f = Parse("examples/03-kueue-integration.yaml");
  ASSERT_EQ(f.jobs.size(), 1u);  // the second document is comments only
  EXPECT_TRUE(f.jobs[0].suspend);
  EXPECT_EQ(f.jobs[0].trainer.image, "python:3.11-slim");
  EXPECT_EQ(f.jobs[0].labels.at("kueue.x-k8s.io/queue-name"), "training-queue");
  EXPECT_EQ(f.jobs[0].queue_name, "training-queue");
  EXPECT_EQ(f.jobs[0].priority_class, "");
  EXPECT_FALSE(HasWarning(f, "kueue.x-k8s.io/queue-name"));
}

TEST_F(ConformanceTest, VolcanoExampleHasRuntimeAndJob) {
  ParsedFile f = Parse("examples/04-volcano-integration.yaml");
  ASSERT_EQ(f.runtimes.size(), 1u);
  ASSERT_EQ(f.jobs.size(), 1u);
  EXPECT_EQ(f.runtimes[0].kind, "ClusterTrainingRuntime");
  EXPECT_EQ(f.jobs[0].runtime_ref.name, f.runtimes[0].name);
  EXPECT_EQ(f.jobs[0].trainer.num_nodes, 4);
  EXPECT_TRUE(
      HasWarning(f, "ClusterTrainingRuntime/torch-distributed-volcano: spec.podGroupPolicy"));
}

TEST_F(ConformanceTest, MultiStepExample) {
  ParsedFile f = Parse("examples/05-multi-step.yaml");
  ASSERT_EQ(f.runtimes.size(), 1u);
  ASSERT_EQ(f.jobs.size(), 1u);
  const TrainingRuntime& rt = f.runtimes[0];
  EXPECT_EQ(rt.kind, "TrainingRuntime");
  EXPECT_EQ(rt.name, "torch-with-dataset-init");
  EXPECT_EQ(rt.replicated_jobs, (std::vector<std::string>{"dataset-initializer", "node"}));
  EXPECT_EQ(f.jobs[0].runtime_ref.kind, "TrainingRuntime");
  EXPECT_EQ(f.jobs[0].trainer.num_nodes, 2);
  // spec.initializer feeds the dataset-initializer step now (issue 18): read, not ignored.
  EXPECT_FALSE(HasWarning(f, "spec.initializer: ignored"));
  ASSERT_TRUE(f.jobs[0].dataset_initializer.has_value());
  EXPECT_EQ(f.jobs[0].dataset_initializer->storage_uri, "hf://tatsu-lab/alpaca");
  ASSERT_EQ(rt.jobs.size(), 2u);
  EXPECT_EQ(rt.jobs[1].depends_on,
            (std::vector<JobDependency>{{"dataset-initializer", "Complete"}}));
  ASSERT_TRUE(rt.jobs[0].container.has_value());
  EXPECT_TRUE(rt.jobs[0].container->command.empty());  // the built-in initializer runs it
}

TEST_F(ConformanceTest, MlxRuntimeIsMpi) {
  ParsedFile f = Parse("runtimes/mlx_distributed.yaml");
  ASSERT_EQ(f.runtimes.size(), 1u);
  const TrainingRuntime& rt = f.runtimes[0];
  EXPECT_EQ(rt.name, "mlx-distributed");
  EXPECT_EQ(rt.ml_policy.framework, Framework::kMpi);
  ASSERT_TRUE(rt.ml_policy.mpi.has_value());
  EXPECT_EQ(rt.ml_policy.mpi->num_proc_per_node, 1);
  EXPECT_EQ(rt.ml_policy.num_proc_per_node, "1");
  EXPECT_TRUE(rt.ml_policy.mpi->run_launcher_as_node);
  EXPECT_EQ(rt.ml_policy.mpi->implementation, "OpenMPI");
  EXPECT_EQ(rt.ml_policy.mpi->ssh_auth_mount_path, "/home/mpiuser/.ssh");
  EXPECT_EQ(rt.replicated_jobs, (std::vector<std::string>{"node", "launcher"}));
  ASSERT_TRUE(rt.node && rt.launcher);
  EXPECT_EQ(rt.node->command, (std::vector<std::string>{"/usr/sbin/sshd"}));
  EXPECT_EQ(rt.node->args.size(), 3u);
  EXPECT_TRUE(rt.launcher->command.empty());
  EXPECT_EQ(rt.launcher->image, "ghcr.io/kubeflow/trainer/mlx-runtime");
  EXPECT_TRUE(HasWarning(f, "readinessProbe: ignored"));
}

TEST_F(ConformanceTest, OtherFrameworksAndEnvFromFieldRefs) {
  EXPECT_EQ(Parse("runtimes/jax_distributed.yaml").runtimes.at(0).ml_policy.framework,
            Framework::kJax);
  EXPECT_EQ(Parse("runtimes/xgboost_distributed.yaml").runtimes.at(0).ml_policy.framework,
            Framework::kXgboost);

  ParsedFile cache = Parse("runtimes/torch_distributed_with_cache.yaml");
  ASSERT_EQ(cache.runtimes.size(), 1u);
  ASSERT_TRUE(cache.runtimes[0].node.has_value());
  EXPECT_TRUE(cache.runtimes[0].node->env.empty());  // its only variable uses valueFrom
  EXPECT_TRUE(HasWarning(cache, "env[0].valueFrom: variable TRAIN_JOB_NAME skipped"));

  ParsedFile llama = Parse("runtimes/llama3_2_1B.yaml");
  ASSERT_EQ(llama.runtimes.size(), 1u);
  EXPECT_EQ(llama.runtimes[0].name, "torchtune-llama3.2-1b");
  EXPECT_EQ(llama.runtimes[0].replicated_jobs.size(), 3u);
  ASSERT_TRUE(llama.runtimes[0].node.has_value());
  EXPECT_EQ(llama.runtimes[0].node->command.at(0), "tune");
}

}  // namespace
}  // namespace trainlet::trainjob
