// Re-apply as kubectl does: a document laid over the stored one; fields left out are no change.

#include "common/trainjob/apply_merge.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/trainjob/trainjob_model.h"
#include "common/trainjob/yaml_support.h"

namespace trainlet::trainjob {
namespace {

using ::testing::HasSubstr;

constexpr const char* kStored = R"(apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: my-trainjob
  labels:
    team: a
spec:
  runtimeRef:
    name: torch-distributed
  trainer:
    numNodes: 2
    command: [torchrun, train.py]
    env:
    - name: A
      value: "1"
)";

// Kubeflow's lifecycle guide: only the identifying fields and spec.suspend.
constexpr const char* kShortSuspend = R"(apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: my-trainjob
spec:
  suspend: true
)";

TEST(MergeApplied, MapsMergeListsAndScalarsReplaceNullRemoves) {
  YAML::Node stored = YAML::Load(kStored);
  YAML::Node applied = YAML::Load(
      "spec:\n  trainer:\n    numNodes: 3\n    command: [python3]\n  suspend: true\n"
      "metadata:\n  labels: ~\n");
  YAML::Node merged = MergeApplied(stored, applied);
  EXPECT_EQ(merged["spec"]["trainer"]["numNodes"].as<int>(), 3);
  ASSERT_EQ(merged["spec"]["trainer"]["command"].size(), 1u);
  EXPECT_EQ(merged["spec"]["trainer"]["env"][0]["name"].as<std::string>(), "A");  // kept
  EXPECT_TRUE(merged["spec"]["suspend"].as<bool>());
  EXPECT_FALSE(merged["metadata"]["labels"].IsDefined());  // null removes
  EXPECT_EQ(merged["spec"]["runtimeRef"]["name"].as<std::string>(), "torch-distributed");
  // The inputs are untouched.
  EXPECT_EQ(stored["spec"]["trainer"]["numNodes"].as<int>(), 2);
  EXPECT_FALSE(stored["spec"]["suspend"].IsDefined());
}

TEST(MergeApplied, UnchangedDocumentEmitsTheSame) {
  YAML::Node stored = YAML::Load(kStored);
  EXPECT_EQ(EmitYaml(MergeApplied(stored, YAML::Load(kStored))), EmitYaml(stored));
  EXPECT_EQ(EmitYaml(MergeApplied(stored, YAML::Load("metadata:\n  name: my-trainjob\n"))),
            EmitYaml(stored));
}

TEST(ParseWithStored, AShortSuspendDocumentIsTheStoredJobSuspended) {
  auto first = ParseDocuments(kStored);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  const std::string stored_yaml = first->jobs.at(0).yaml;
  // Alone, the short document is not a TrainJob: runtimeRef is required.
  auto alone = ParseDocuments(kShortSuspend);
  ASSERT_FALSE(alone.ok());
  EXPECT_THAT(alone.status().message(), HasSubstr("spec.runtimeRef: required field missing"));

  int asked = 0;
  const StoredDocument stored = [&](std::string_view kind, const std::string& ns,
                                    const std::string& name) -> std::optional<std::string> {
    ++asked;
    EXPECT_EQ(kind, "TrainJob");
    EXPECT_EQ(ns, "");
    if (name != "my-trainjob") return std::nullopt;
    return stored_yaml;
  };
  auto again = ParseDocuments(kShortSuspend, stored);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(asked, 1);
  const TrainJob& job = again->jobs.at(0);
  EXPECT_TRUE(job.suspend);
  EXPECT_EQ(job.trainer.num_nodes, 2);
  EXPECT_EQ(job.runtime_ref.name, "torch-distributed");
  EXPECT_EQ(job.labels.at("team"), "a");

  // spec.suspend is the applied document's: the original file (no suspend) over a suspended
  // stored job reads as resumed, as kubectl apply drops a field its last document had.
  const std::string suspended_yaml = job.yaml;
  const StoredDocument stored_suspended = [&](std::string_view, const std::string&,
                                              const std::string&) -> std::optional<std::string> {
    return suspended_yaml;
  };
  auto original = ParseDocuments(kStored, stored_suspended);
  ASSERT_TRUE(original.ok()) << original.status().ToString();
  EXPECT_FALSE(original->jobs.at(0).suspend);
  EXPECT_EQ(original->jobs.at(0).yaml, stored_yaml);

  // A job the store does not hold is checked alone, as before.
  auto other =
      ParseDocuments(std::string(kShortSuspend)
                         .replace(std::string(kShortSuspend).find("my-trainjob"), 11, "other-job"),
                     stored);
  ASSERT_FALSE(other.ok());
  EXPECT_THAT(other.status().message(), HasSubstr("TrainJob/other-job: spec.runtimeRef"));
  // The merged document is still checked: a bad value is refused by path.
  auto bad = ParseDocuments(
      "apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata:\n  name: "
      "my-trainjob\nspec:\n  trainer:\n    numNodes: many\n",
      stored);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("spec.trainer.numNodes: must be an integer"));
}

}  // namespace
}  // namespace trainlet::trainjob
