// A runtime's failurePolicy.rules and ttlSecondsAfterFinished (common/trainjob/failure_policy.h):
// read in order, refused by path where JobSet's webhook or the CRD schema refuses them.
#include "common/trainjob/failure_policy.h"

#include <gtest/gtest.h>

namespace trainlet::trainjob {
namespace {

// A runtime with replicatedJobs node and dataset-initializer, `policy` under its JobSet spec.
std::string Runtime(const std::string& policy) {
  return "apiVersion: trainer.kubeflow.org/v1alpha1\n"
         "kind: ClusterTrainingRuntime\n"
         "metadata:\n"
         "  name: rt\n"
         "spec:\n"
         "  template:\n"
         "    spec:\n" +
         policy +
         "      replicatedJobs:\n"
         "        - name: dataset-initializer\n"
         "          template:\n"
         "            spec:\n"
         "              template:\n"
         "                spec:\n"
         "                  containers:\n"
         "                    - name: dataset-initializer\n"
         "        - name: node\n"
         "          template:\n"
         "            spec:\n"
         "              template:\n"
         "                spec:\n"
         "                  containers:\n"
         "                    - name: node\n"
         "                      command: [\"true\"]\n";
}

std::string Rules(const std::string& rules) {
  return "      failurePolicy:\n"
         "        maxRestarts: 3\n"
         "        rules:\n" +
         rules;
}

Result<ParsedFile> Parse(const std::string& policy) { return ParseDocuments(Runtime(policy)); }

TEST(FailurePolicyTest, RulesAreReadInOrder) {
  auto file = Parse(Rules("          - name: failOnUserError\n"
                          "            action: FailJobSet\n"
                          "            onJobFailureReasons: [BackoffLimitExceeded]\n"
                          "            targetReplicatedJobs: [node, dataset-initializer]\n"
                          "          - name: restart_all:x\n"
                          "            action: RestartJobSetAndIgnoreMaxRestarts\n"
                          "            onJobFailureMessagePatterns: [\"signal [0-9]+\"]\n") +
                    "      ttlSecondsAfterFinished: 30\n");
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  const TrainingRuntime& rt = file->runtimes.at(0);
  EXPECT_EQ(rt.max_restarts, 3);
  ASSERT_EQ(rt.failure_rules.size(), 2u);
  EXPECT_EQ(rt.failure_rules[0].name, "failOnUserError");
  EXPECT_EQ(rt.failure_rules[0].action, "FailJobSet");
  EXPECT_EQ(rt.failure_rules[0].on_job_failure_reasons,
            std::vector<std::string>{"BackoffLimitExceeded"});
  EXPECT_EQ(rt.failure_rules[0].target_replicated_jobs,
            (std::vector<std::string>{"node", "dataset-initializer"}));
  EXPECT_EQ(rt.failure_rules[1].action, "RestartJobSetAndIgnoreMaxRestarts");
  EXPECT_EQ(rt.failure_rules[1].on_job_failure_message_patterns,
            std::vector<std::string>{"signal [0-9]+"});
  EXPECT_EQ(rt.ttl_seconds_after_finished, 30);
}

TEST(FailurePolicyTest, NoPolicyNoRulesNoTtl) {
  auto file = Parse("");
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_TRUE(file->runtimes.at(0).failure_rules.empty());
  EXPECT_FALSE(file->runtimes.at(0).ttl_seconds_after_finished.has_value());
}

TEST(FailurePolicyTest, UnknownTargetIsRefusedByPath) {
  auto file =
      Parse(Rules("          - name: a\n"
                  "            action: FailJobSet\n"
                  "          - name: b\n"
                  "            action: FailJobSet\n"
                  "            targetReplicatedJobs: [node, trainer]\n"));
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().message(),
            "ClusterTrainingRuntime/rt: spec.template.spec.failurePolicy.rules[1]."
            "targetReplicatedJobs[1]: no replicatedJob \"trainer\" in this template "
            "(replicatedJobs: dataset-initializer, node)");
}

TEST(FailurePolicyTest, UnknownReasonIsRefusedByPath) {
  auto file =
      Parse(Rules("          - name: a\n"
                  "            action: FailJobSet\n"
                  "            onJobFailureReasons: [OOMKilled]\n"));
  ASSERT_FALSE(file.ok());
  EXPECT_NE(file.status().message().find(
                "spec.template.spec.failurePolicy.rules[0].onJobFailureReasons[0]: \"OOMKilled\" "
                "is not a Job failure reason"),
            std::string::npos)
      << file.status().message();
}

TEST(FailurePolicyTest, BadOrDuplicateNamesAreRefused) {
  auto bad =
      Parse(Rules("          - name: 9lives\n"
                  "            action: FailJobSet\n"));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("failurePolicy.rules[0].name: \"9lives\" must start"),
            std::string::npos)
      << bad.status().message();
  auto twice =
      Parse(Rules("          - name: a\n"
                  "            action: FailJobSet\n"
                  "          - name: a\n"
                  "            action: RestartJobSet\n"));
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.status().message().find("rules[1].name: rule name \"a\" is not unique"),
            std::string::npos)
      << twice.status().message();
}

TEST(FailurePolicyTest, BadPatternIsRefusedByPath) {
  auto file =
      Parse(Rules("          - name: a\n"
                  "            action: FailJobSet\n"
                  "            onJobFailureMessagePatterns: [\"(unclosed\"]\n"));
  ASSERT_FALSE(file.ok());
  EXPECT_NE(file.status().message().find("rules[0].onJobFailureMessagePatterns[0]: not a regular"),
            std::string::npos)
      << file.status().message();
}

// The CRD schema, checked before the rules are read, refuses what it knows: the action enum,
// a missing action, and a negative TTL.
TEST(FailurePolicyTest, SchemaRefusesBadActionMissingActionAndNegativeTtl) {
  auto action =
      Parse(Rules("          - name: a\n"
                  "            action: Retry\n"));
  ASSERT_FALSE(action.ok());
  EXPECT_NE(action.status().message().find("spec.template.spec.failurePolicy.rules[0].action"),
            std::string::npos)
      << action.status().message();
  auto missing = Parse(Rules("          - name: a\n"));
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("rules[0].action"), std::string::npos)
      << missing.status().message();
  auto ttl = Parse("      ttlSecondsAfterFinished: -1\n");
  ASSERT_FALSE(ttl.ok());
  EXPECT_NE(ttl.status().message().find("spec.template.spec.ttlSecondsAfterFinished"),
            std::string::npos)
      << ttl.status().message();
}

TEST(FailurePolicyTest, RestartJobReadsAsTheJobSetWideActionWithAWarning) {
  auto file =
      Parse(Rules("          - name: a\n"
                  "            action: RestartJobAndIgnoreMaxRestarts\n"));
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ(file->runtimes.at(0).failure_rules.at(0).action, "RestartJobSetAndIgnoreMaxRestarts");
  bool warned = false;
  for (const auto& w : file->warnings) {
    warned |= w.find(
                  "ClusterTrainingRuntime/rt: spec.template.spec.failurePolicy.rules[0]."
                  "action: RestartJobAndIgnoreMaxRestarts restarts the whole gang") == 0;
  }
  EXPECT_TRUE(warned);
}

TEST(FailurePolicyTest, JobFailureMessages) {
  EXPECT_EQ(JobFailureMessage("BackoffLimitExceeded"),
            "Job has reached the specified backoff limit");
  EXPECT_EQ(JobFailureMessage("DeadlineExceeded"), "Job was active longer than specified deadline");
  EXPECT_EQ(JobFailureMessage("PodFailurePolicy"), "");
}

}  // namespace
}  // namespace trainlet::trainjob
