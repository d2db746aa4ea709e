// Apply of a Training Operator job (stored under its own kind, reloaded after a restart), and
// re-apply as kubectl does: a short TrainJob with only the identifying fields and spec.suspend.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "tests/common/trainjob/test_util.h"
#include "tests/coordinator/controller_fixture.h"

namespace trainlet::coordinator {
namespace {

using ::testing::Contains;
using testing::ControllerFixture;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::JobYaml;

class V1ApplyTest : public ControllerFixture {};

std::string Fixture(const std::string& relative) {
  return trainjob::testing::ReadFile(std::filesystem::path(TRAINLET_SOURCE_DIR) / "tests" /
                                     "fixtures" / "kubeflow-v1" / relative);
}

// Kubeflow's lifecycle guide: the identifying fields and spec.suspend, nothing else.
std::string ShortTrainJob(const std::string& name, const std::string& spec) {
  return "apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata:\n  name: " + name +
         "\nspec:\n" + spec;
}

TEST_F(V1ApplyTest, AShortSuspendDocumentSuspendsAndLeavesTheRestAsItWas) {
  ApplyOk(JobYaml("a", 2, 1));
  ASSERT_EQ(PhaseName(JobOrDie("a")), "Starting");
  const std::string before = Stored("a")->spec_yaml;

  v1::ApplyResult suspended = ApplyOk(ShortTrainJob("a", "  suspend: true\n"));
  EXPECT_THAT(suspended.configured(), ElementsAre("trainjob/a"));
  EXPECT_EQ(PhaseName(JobOrDie("a")), "Suspended");
  EXPECT_EQ(JobOrDie("a").num_nodes(), 2u);
  EXPECT_THAT(Stored("a")->spec_yaml, HasSubstr("suspend: true"));
  EXPECT_THAT(Stored("a")->spec_yaml, HasSubstr("numNodes: 2"));

  // The same short document again is no change.
  EXPECT_THAT(ApplyOk(ShortTrainJob("a", "  suspend: true\n")).unchanged(),
              ElementsAre("trainjob/a"));
  // A short document that changes something else is refused, as before.
  auto changed = controller_->Apply(
      ShortTrainJob("a", "  suspend: true\n  trainer:\n    numNodes: 3\n"), "short.yaml", kT0);
  ASSERT_FALSE(changed.ok());
  EXPECT_EQ(changed.status().code(), ErrorCode::kExists);
  EXPECT_THAT(changed.status().message(), HasSubstr("only spec.suspend may change"));

  // Resumed the same way; the spec reads as it was first applied.
  v1::ApplyResult resumed = ApplyOk(ShortTrainJob("a", "  suspend: false\n"), kT0 + 10);
  EXPECT_THAT(resumed.configured(), ElementsAre("trainjob/a"));
  EXPECT_NE(PhaseName(JobOrDie("a")), "Suspended");
}

TEST_F(V1ApplyTest, APyTorchJobKeepsItsKindAcrossARestart) {
  const std::string pytorch = Fixture("training-operator/pytorch_simple.yaml");
  // The fixture is in namespace kubeflow: the job's key is "kubeflow.pytorch-simple" (job_key.h).
  v1::ApplyResult created = ApplyOk(pytorch);
  EXPECT_THAT(created.created(), ElementsAre("trainjob/kubeflow/pytorch-simple"));
  auto check = [&] {
    const v1::JobStatus& st = JobOrDie("kubeflow.pytorch-simple");
    EXPECT_EQ(st.namespace_(), "kubeflow");
    EXPECT_EQ(st.source_kind(), "PyTorchJob");
    EXPECT_EQ(st.source_api_version(), "kubeflow.org/v1");
    EXPECT_EQ(st.runtime(), "TrainingRuntime/pytorchjob.kubeflow.org");
    EXPECT_EQ(st.plugin(), "torch");
    EXPECT_EQ(st.num_nodes(), 2u);
    EXPECT_EQ(st.procs_per_node(), 1u);
    EXPECT_THAT(st.notes(), Contains(HasSubstr("PyTorchJob/pytorch-simple: became TrainJob")));
    EXPECT_THAT(st.notes(), Contains(HasSubstr("containers[0].imagePullPolicy: ignored")));
  };
  check();
  // The converted runtime is the job's own, not a catalog runtime other jobs could name.
  auto other = controller_->Apply(JobYaml("other", 1, 1, "pytorchjob.kubeflow.org"), "", kT0);
  EXPECT_FALSE(other.ok());

  // The same document again is no change; runPolicy.suspend flips it.
  EXPECT_THAT(ApplyOk(pytorch).unchanged(), ElementsAre("trainjob/kubeflow/pytorch-simple"));
  const std::string suspended =
      trainjob::testing::Replace(pytorch, "spec:\n", "spec:\n  runPolicy:\n    suspend: true\n");
  EXPECT_THAT(ApplyOk(suspended).configured(), ElementsAre("trainjob/kubeflow/pytorch-simple"));
  EXPECT_EQ(PhaseName(JobOrDie("kubeflow.pytorch-simple")), "Suspended");

  MakeController();  // a coordinator restart: reloaded from the store
  check();
  EXPECT_EQ(PhaseName(JobOrDie("kubeflow.pytorch-simple")), "Suspended");
}

}  // namespace
}  // namespace trainlet::coordinator
