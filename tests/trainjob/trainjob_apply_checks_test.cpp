// Issue 19, "Validation at apply time": env entries a process environment cannot hold, and rank
// counts that overflow, are refused when the file is applied, by path, instead of costing an
// attempt at the agent (or wrapping round to a wrong number).
#include <gtest/gtest.h>

#include <climits>

#include "common/trainjob/trainjob_model.h"

namespace trainlet::trainjob {
namespace {

using namespace std::string_literals;

// A TrainJob whose trainer env is: A=1, B=2, then `entry` (a YAML flow mapping).
std::string JobWithEnv(const std::string& entry) {
  return "apiVersion: trainer.kubeflow.org/v1alpha1\n"
         "kind: TrainJob\n"
         "metadata: {name: x}\n"
         "spec:\n"
         "  runtimeRef: {name: torch-distributed}\n"
         "  trainer:\n"
         "    command: [sh, -c, 'true']\n"
         "    env:\n"
         "      - {name: A, value: '1'}\n"
         "      - {name: B, value: '2'}\n"
         "      - " +
         entry + "\n";
}

std::string ErrorOf(const std::string& yaml) {
  auto parsed = ParseDocuments(yaml);
  if (parsed.ok()) return "(accepted)";
  EXPECT_EQ(parsed.status().code(), ErrorCode::kInvalid);
  return parsed.status().message();
}

TEST(ApplyChecksTest, GoodEnvIsAccepted) {
  auto parsed = ParseDocuments(JobWithEnv("{name: C_3, value: 'a=b c'}"));
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  ASSERT_EQ(parsed->jobs.size(), 1u);
  EXPECT_EQ(parsed->jobs[0].trainer.env.back().value, "a=b c");
}

TEST(ApplyChecksTest, EmptyEnvNameIsRefusedByPath) {
  EXPECT_EQ(ErrorOf(JobWithEnv("{name: '', value: v}")),
            "TrainJob/x: spec.trainer.env[2].name: must not be empty");
}

TEST(ApplyChecksTest, EnvNameWithEqualsIsRefusedByPath) {
  EXPECT_EQ(ErrorOf(JobWithEnv("{name: 'A=B', value: v}")),
            "TrainJob/x: spec.trainer.env[2].name: must not contain '=', got \"A=B\"");
}

TEST(ApplyChecksTest, NulInEnvNameOrValueIsRefusedByPath) {
  EXPECT_EQ(ErrorOf(JobWithEnv("{name: \"A\\0B\", value: v}")),
            "TrainJob/x: spec.trainer.env[2].name: must not contain a NUL byte");
  // Today's agent would pass "a" and silently drop the rest.
  EXPECT_EQ(ErrorOf(JobWithEnv("{name: C, value: \"a\\0b\"}")),
            "TrainJob/x: spec.trainer.env[2].value: must not contain a NUL byte");
}

TEST(ApplyChecksTest, RuntimeContainerEnvIsCheckedToo) {
  const std::string runtime =
      "apiVersion: trainer.kubeflow.org/v1alpha1\n"
      "kind: ClusterTrainingRuntime\n"
      "metadata: {name: rt}\n"
      "spec:\n"
      "  mlPolicy: {numNodes: 1}\n"
      "  template:\n"
      "    spec:\n"
      "      replicatedJobs:\n"
      "        - name: node\n"
      "          template:\n"
      "            spec:\n"
      "              template:\n"
      "                spec:\n"
      "                  containers:\n"
      "                    - name: node\n"
      "                      image: x\n"
      "                      env: [{name: '', value: v}]\n";
  const std::string error = ErrorOf(runtime);
  EXPECT_NE(error.find("ClusterTrainingRuntime/rt: "), std::string::npos) << error;
  EXPECT_NE(error.find(".containers[0].env[0].name: must not be empty"), std::string::npos)
      << error;
}

TrainingRuntime Runtime() {
  TrainingRuntime rt;
  rt.kind = "ClusterTrainingRuntime";
  rt.name = "torch-distributed";
  ContainerSpec node;
  node.command = {"true"};
  rt.node = node;
  return rt;
}

TrainJob Job(std::optional<int32_t> nodes, std::optional<std::string> procs) {
  TrainJob job;
  job.name = "x";
  job.runtime_ref.kind = "ClusterTrainingRuntime";
  job.runtime_ref.name = "torch-distributed";
  job.trainer.num_nodes = nodes;
  job.trainer.num_proc_per_node = procs;
  return job;
}

TEST(ApplyChecksTest, RankCountThatOverflowsIsRefusedNamingTheFields) {
  auto r = Resolve(Job(INT32_MAX, "4096"), Runtime());
  ASSERT_FALSE(r.ok()) << "resolved " << r->num_nodes << " x " << r->num_proc_per_node;
  EXPECT_EQ(r.status().message(),
            "TrainJob/x: spec.trainer.numNodes x spec.trainer.numProcPerNode: 2147483647 x 4096 "
            "= 8796093018112 ranks, more than 2147483647");
  // The runtime's numProcPerNode is named when the job leaves it out.
  TrainingRuntime rt = Runtime();
  rt.ml_policy.num_proc_per_node = "2";
  auto from_runtime = Resolve(Job(INT32_MAX, std::nullopt), rt);
  ASSERT_FALSE(from_runtime.ok());
  EXPECT_NE(from_runtime.status().message().find(
                "spec.trainer.numNodes x numProcPerNode of runtime "
                "ClusterTrainingRuntime/torch-distributed: 2147483647 x 2"),
            std::string::npos)
      << from_runtime.status().message();
}

TEST(ApplyChecksTest, LargestRankCountsStillResolve) {
  EXPECT_TRUE(Resolve(Job(INT32_MAX, "1"), Runtime()).ok());
  EXPECT_TRUE(Resolve(Job(524287, "4096"), Runtime()).ok());  // 2^31 - 4096 ranks
  EXPECT_TRUE(Resolve(Job(2, "auto"), Runtime()).ok());       // counted on the node
}

}  // namespace
}  // namespace trainlet::trainjob
