// Mutated copies of Kubeflow's files, and small hand-written documents, must be refused with the
// document and the field path.

#include <gtest/gtest.h>

#include "common/trainjob/trainjob_model.h"
#include "tests/common/trainjob/test_util.h"

namespace trainlet::trainjob {
namespace {

using testing::KubeflowDir;
using testing::ReadFile;
using testing::Replace;

constexpr const char* kJob = R"(apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: hello
spec:
  runtimeRef:
    name: torch-distributed
  trainer:
    numNodes: 2
    command: [python3, train.py]
    env:
      - name: A
        value: "1"
)";

std::string ErrorOf(const std::string& yaml) {
  auto parsed = ParseDocuments(yaml);
  EXPECT_FALSE(parsed.ok()) << yaml;
  if (parsed.ok()) return "";
  EXPECT_EQ(parsed.status().code(), ErrorCode::kInvalid);
  return parsed.status().message();
}

#define EXPECT_CONTAINS(haystack, needle) \
  EXPECT_NE((haystack).find(needle), std::string::npos) << (haystack)

TEST(MutationTest, BaseDocumentIsValid) {
  auto parsed = ParseDocuments(kJob);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_TRUE(parsed->warnings.empty()) << parsed->warnings[0];
  EXPECT_EQ(parsed->jobs.at(0).runtime_ref.kind, "ClusterTrainingRuntime");  // the CRD default
}

TEST(MutationTest, NumNodesWrongType) {
  EXPECT_EQ(ErrorOf(Replace(kJob, "numNodes: 2", "numNodes: three")),
            "TrainJob/hello: spec.trainer.numNodes: must be an integer, got \"three\"");
}

TEST(MutationTest, NumNodesBelowSchemaMinimum) {
  EXPECT_EQ(ErrorOf(Replace(kJob, "numNodes: 2", "numNodes: -1")),
            "TrainJob/hello: spec.trainer.numNodes: must be >= 0, got -1");
}

TEST(MutationTest, NumProcPerNodeRule) {
  std::string m = ErrorOf(Replace(kJob, "numNodes: 2", "numNodes: 2\n    numProcPerNode: 0"));
  EXPECT_CONTAINS(m,
                  "spec.trainer.numProcPerNode: numProcPerNode must be greater than or equal to 1");
}

TEST(MutationTest, EnvEntryWithoutName) {
  EXPECT_EQ(ErrorOf(Replace(kJob, "- name: A\n", "- value2: A\n")),
            "TrainJob/hello: spec.trainer.env[0].name: required field missing");
}

TEST(MutationTest, EnvValueMustBeAString) {
  EXPECT_EQ(ErrorOf(Replace(kJob, "value: \"1\"", "value: 1")),
            "TrainJob/hello: spec.trainer.env[0].value: must be a string, got 1");
}

TEST(MutationTest, WrongApiVersion) {
  EXPECT_EQ(ErrorOf(Replace(kJob, "trainer.kubeflow.org/v1alpha1", "v1")),
            "document 1: apiVersion: must be trainer.kubeflow.org/v1alpha1, got \"v1\"");
}

TEST(MutationTest, UnknownKind) {
  EXPECT_EQ(ErrorOf(Replace(kJob, "kind: TrainJob", "kind: Pod")),
            "document 1: kind: \"Pod\" is not TrainJob, TrainingRuntime or ClusterTrainingRuntime");
}

TEST(MutationTest, MissingMetadataName) {
  EXPECT_EQ(ErrorOf(Replace(kJob, "  name: hello\n", "  labels: {a: b}\n")),
            "document 1: metadata.name: required field missing");
  EXPECT_CONTAINS(ErrorOf(Replace(kJob, "name: hello", "name: Hello_World")),
                  "document 1: metadata.name: must be a lowercase RFC 1035 label");
  EXPECT_CONTAINS(ErrorOf(Replace(kJob, "name: hello", "name: " + std::string(64, 'a'))),
                  "metadata.name");
}

TEST(MutationTest, MalformedYamlGivesLineAndColumn) {
  std::string m =
      ErrorOf(Replace(kJob, "command: [python3, train.py]", "command: [python3, train.py"));
  EXPECT_CONTAINS(m, "document 1: line ");
  EXPECT_CONTAINS(m, ", column ");
  EXPECT_CONTAINS(m, "YAML syntax error");
  // The second document is the broken one; lines count from the top of the file.
  std::string two = std::string(kJob) + "---\nkind: TrainJob\n  bad: indent\n";
  EXPECT_CONTAINS(ErrorOf(two), "document 2: line 16");
}

TEST(MutationTest, RuntimeRefChecks) {
  EXPECT_EQ(ErrorOf(Replace(kJob, "    name: torch-distributed\n", "    kind: Foo\n")),
            "TrainJob/hello: spec.runtimeRef.name: required field missing");
  EXPECT_CONTAINS(ErrorOf(Replace(kJob, "    name: torch-distributed",
                                  "    name: torch-distributed\n    kind: Foo")),
                  "TrainJob/hello: spec.runtimeRef.kind: must be ClusterTrainingRuntime or");
}

TEST(MutationTest, UnknownFieldIsAWarningNotAnError) {
  auto parsed = ParseDocuments(Replace(kJob, "numNodes: 2", "numNodes: 2\n    gpusPerNode: 8"));
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  ASSERT_EQ(parsed->warnings.size(), 1u);
  EXPECT_EQ(parsed->warnings[0],
            "TrainJob/hello: spec.trainer.gpusPerNode: unknown field, ignored");
}

TEST(MutationTest, OneBadDocumentFailsTheFile) {
  std::string two =
      std::string(kJob) + "---\n" +
      Replace(Replace(kJob, "name: hello", "name: second"), "numNodes: 2", "numNodes: [2]");
  EXPECT_EQ(ErrorOf(two),
            "TrainJob/second: spec.trainer.numNodes: must be an integer, got an array");
  EXPECT_CONTAINS(ErrorOf(std::string(kJob) + "---\n" + kJob),
                  "TrainJob/hello: defined twice in this file (documents 1 and 2)");
}

TEST(MutationTest, NonObjectDocuments) {
  EXPECT_EQ(ErrorOf("just a string\n"),
            "document 1: must be an object with apiVersion and kind, got \"just a string\"");
  EXPECT_EQ(ErrorOf("---\n# nothing\n---\n- a\n"),
            "document 2: must be an object with apiVersion and kind, got an array");
  auto empty = ParseDocuments("# nothing here\n---\n");
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->jobs.empty() && empty->runtimes.empty());
}

TEST(MutationTest, LimitsAreErrorsNotCrashes) {
  std::string deep = "apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nspec: ";
  deep += std::string(5000, '[');
  EXPECT_CONTAINS(ErrorOf(deep), "nested deeper than 64 levels");
  std::string big(5u << 20, '#');
  EXPECT_CONTAINS(ErrorOf(big), "over the limit");
}

class KubeflowMutationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::is_directory(KubeflowDir())) {
      GTEST_SKIP() << "no Kubeflow files at " << KubeflowDir();
    }
  }
  std::string File(const std::string& relative) { return ReadFile(KubeflowDir() / relative); }
};

TEST_F(KubeflowMutationTest, MultiNodeNumNodesThree) {
  EXPECT_EQ(
      ErrorOf(Replace(File("examples/01-multi-node.yaml"), "numNodes: 3", "numNodes: \"three\"")),
      "TrainJob/multi-node-example: spec.trainer.numNodes: must be an integer, got \"three\"");
  EXPECT_EQ(ErrorOf(Replace(File("examples/01-multi-node.yaml"), "numNodes: 3", "numNodes: -1")),
            "TrainJob/multi-node-example: spec.trainer.numNodes: must be >= 0, got -1");
}

TEST_F(KubeflowMutationTest, EnvWithoutNameInRuntimePatchesExample) {
  EXPECT_EQ(ErrorOf(Replace(File("examples/02-runtime-patches.yaml"), "- name: CUSTOM_VAR",
                            "- nam: CUSTOM_VAR")),
            "TrainJob/runtime-patches-example: spec.trainer.env[0].name: required field missing");
}

TEST_F(KubeflowMutationTest, MpiImplementationNotInEnum) {
  EXPECT_EQ(ErrorOf(Replace(File("runtimes/mlx_distributed.yaml"), "mpiImplementation: OpenMPI",
                            "mpiImplementation: MPICH")),
            "ClusterTrainingRuntime/mlx-distributed: spec.mlPolicy.mpi.mpiImplementation: must be "
            "one of \"OpenMPI\", \"\", got \"MPICH\"");
}

TEST_F(KubeflowMutationTest, TwoPoliciesAtOnce) {
  EXPECT_EQ(ErrorOf(Replace(File("runtimes/torch_distributed.yaml"), "torch: {}",
                            "torch: {}\n    jax: {}")),
            "ClusterTrainingRuntime/torch-distributed: spec.mlPolicy: only one of torch, mpi, "
            "jax, xgboost and flux may be set");
}

TEST_F(KubeflowMutationTest, DeepInsideThePodTemplate) {
  std::string m =
      ErrorOf(Replace(File("runtimes/mlx_distributed.yaml"), "port: 2222", "port: 2222.5"));
  EXPECT_EQ(m,
            "ClusterTrainingRuntime/mlx-distributed: spec.template.spec.replicatedJobs[0].template."
            "spec.template.spec.containers[0].readinessProbe.tcpSocket.port: must be an integer "
            "or a string, got 2222.5");
}

TEST_F(KubeflowMutationTest, ApiVersionAndKindInAKubeflowFile) {
  EXPECT_EQ(ErrorOf(Replace(File("runtimes/jax_distributed.yaml"),
                            "apiVersion: trainer.kubeflow.org/v1alpha1", "apiVersion: v1")),
            "document 1: apiVersion: must be trainer.kubeflow.org/v1alpha1, got \"v1\"");
  std::string volcano = File("examples/04-volcano-integration.yaml");
  size_t second = volcano.find("kind: TrainJob");
  ASSERT_NE(second, std::string::npos);
  volcano.replace(second, 14, "kind: Deployment");
  EXPECT_EQ(ErrorOf(volcano),
            "document 2: kind: \"Deployment\" is not TrainJob, TrainingRuntime "
            "or ClusterTrainingRuntime");
}

}  // namespace
}  // namespace trainlet::trainjob
