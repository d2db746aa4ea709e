// Every replicatedJob of a runtime, modelled (ReplicatedJob), with JobSet's dependsOn rules
// checked by path; and a TrainJob's spec.initializer.

#include <gtest/gtest.h>

#include <string>

#include "common/trainjob/trainjob_model.h"

namespace trainlet::trainjob {
namespace {

// A ClusterTrainingRuntime "x" whose replicatedJobs are `jobs` (YAML list items, indented for
// the list under spec.template.spec.replicatedJobs).
std::string RuntimeWith(const std::string& jobs) {
  return "apiVersion: trainer.kubeflow.org/v1alpha1\n"
         "kind: ClusterTrainingRuntime\n"
         "metadata: {name: x}\n"
         "spec:\n"
         "  mlPolicy: {numNodes: 1}\n"
         "  template:\n"
         "    spec:\n"
         "      replicatedJobs:\n" +
         jobs;
}

// One replicatedJob named `name` with a container `container` running `command`, and the
// dependsOn lines `deps` (already indented, or "").
std::string Job(const std::string& name, const std::string& deps = "",
                const std::string& container = "", const std::string& extra = "") {
  return "        - name: " + name + "\n" + extra + deps +
         "          template:\n"
         "            spec:\n"
         "              template:\n"
         "                spec:\n"
         "                  containers:\n"
         "                    - name: sidecar\n"
         "                      command: [sleep, '1']\n"
         "                    - name: " +
         (container.empty() ? name : container) +
         "\n"
         "                      command: [echo, " +
         name +
         "]\n"
         "                      env: [{name: A, value: b}]\n";
}

std::string Deps(std::initializer_list<std::pair<const char*, const char*>> deps) {
  std::string out = "          dependsOn:\n";
  for (const auto& [name, status] : deps) {
    out += std::string("            - {name: ") + name + ", status: " + status + "}\n";
  }
  return out;
}

std::string ErrorOf(const std::string& yaml) {
  auto parsed = ParseDocuments(yaml);
  return parsed.ok() ? std::string("(parsed)") : parsed.status().message();
}

TEST(ReplicatedJobsTest, EveryJobIsModelledWithItsContainerReplicasAndDependencies) {
  auto parsed =
      ParseDocuments(RuntimeWith(Job("dataset-initializer", "", "", "          replicas: 2\n") +
                                 Job("node", Deps({{"dataset-initializer", "Complete"}}))));
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  const TrainingRuntime& rt = parsed->runtimes.at(0);
  ASSERT_EQ(rt.jobs.size(), 2u);
  EXPECT_EQ(rt.jobs[0].name, "dataset-initializer");
  EXPECT_EQ(rt.jobs[0].replicas, 2);
  ASSERT_TRUE(rt.jobs[0].container.has_value());
  // The container named like the job, not the first one.
  EXPECT_EQ(rt.jobs[0].container->command,
            (std::vector<std::string>{"echo", "dataset-initializer"}));
  EXPECT_EQ(rt.jobs[0].container->env, (std::vector<EnvVar>{{"A", "b"}}));
  EXPECT_TRUE(rt.jobs[0].depends_on.empty());
  EXPECT_EQ(rt.jobs[1].name, "node");
  EXPECT_EQ(rt.jobs[1].replicas, 1);  // JobSet's default
  EXPECT_EQ(rt.jobs[1].depends_on,
            (std::vector<JobDependency>{{"dataset-initializer", "Complete"}}));
  ASSERT_TRUE(rt.node.has_value());
  EXPECT_EQ(rt.jobs[1].container->command, rt.node->command);
}

TEST(ReplicatedJobsTest, AStepContainerFallsBackToNodeThenTheFirst) {
  auto parsed = ParseDocuments(RuntimeWith(Job("prep", "", "node") + Job("node")));
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->runtimes[0].jobs[0].container->command,
            (std::vector<std::string>{"echo", "prep"}));  // the one named "node"
  parsed = ParseDocuments(RuntimeWith(Job("prep", "", "other") + Job("node")));
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->runtimes[0].jobs[0].container->command,
            (std::vector<std::string>{"sleep", "1"}));  // the first
}

TEST(ReplicatedJobsTest, AnUnknownNameIsRefusedByPath) {
  EXPECT_EQ(ErrorOf(RuntimeWith(Job("init") + Job("node", Deps({{"foo", "Complete"}})))),
            "ClusterTrainingRuntime/x: spec.template.spec.replicatedJobs[1].dependsOn[0].name: "
            "no replicated job \"foo\" in this runtime");
}

TEST(ReplicatedJobsTest, ASelfReferenceIsRefused) {
  EXPECT_EQ(ErrorOf(RuntimeWith(Job("init") +
                                Job("node", Deps({{"init", "Ready"}, {"node", "Complete"}})))),
            "ClusterTrainingRuntime/x: spec.template.spec.replicatedJobs[1].dependsOn[1].name: "
            "replicated job \"node\" cannot depend on itself");
}

TEST(ReplicatedJobsTest, ACycleIsRefusedAndNamed) {
  EXPECT_EQ(ErrorOf(RuntimeWith(Job("a", Deps({{"c", "Complete"}})) +
                                Job("b", Deps({{"a", "Complete"}})) +
                                Job("c", Deps({{"b", "Ready"}})) + Job("node"))),
            "ClusterTrainingRuntime/x: spec.template.spec.replicatedJobs[0].dependsOn: "
            "dependency cycle: a -> c -> b -> a");
}

TEST(ReplicatedJobsTest, MoreThanFiveEntriesAreRefused) {
  std::string jobs;
  for (const char* n : {"a", "b", "c", "d", "e", "f"}) jobs += Job(n);
  jobs += Job("node", Deps({{"a", "Complete"},
                            {"b", "Complete"},
                            {"c", "Complete"},
                            {"d", "Complete"},
                            {"e", "Complete"},
                            {"f", "Complete"}}));
  const std::string error = ErrorOf(RuntimeWith(jobs));
  // The CRD schema's maxItems answers first; either way the path names the list.
  EXPECT_NE(error.find("ClusterTrainingRuntime/x: spec.template.spec.replicatedJobs[6].dependsOn"),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("5"), std::string::npos) << error;
}

TEST(ReplicatedJobsTest, AStatusOtherThanReadyOrCompleteIsRefused) {
  const std::string error =
      ErrorOf(RuntimeWith(Job("init") + Job("node", Deps({{"init", "Succeeded"}}))));
  EXPECT_NE(error.find("spec.template.spec.replicatedJobs[1].dependsOn[0].status"),
            std::string::npos)
      << error;
}

TEST(ReplicatedJobsTest, TrainJobInitializersAreRead) {
  auto parsed = ParseDocuments(
      "apiVersion: trainer.kubeflow.org/v1alpha1\n"
      "kind: TrainJob\n"
      "metadata: {name: j}\n"
      "spec:\n"
      "  runtimeRef: {name: x}\n"
      "  initializer:\n"
      "    dataset:\n"
      "      storageUri: hf://tatsu-lab/alpaca\n"
      "      env: [{name: HF_TOKEN, value: t}]\n"
      "    model:\n"
      "      storageUri: file:///models/m\n"
      "      secretRef: {name: s}\n");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  const TrainJob& job = parsed->jobs.at(0);
  ASSERT_TRUE(job.dataset_initializer.has_value());
  EXPECT_EQ(job.dataset_initializer->storage_uri, "hf://tatsu-lab/alpaca");
  EXPECT_EQ(job.dataset_initializer->env, (std::vector<EnvVar>{{"HF_TOKEN", "t"}}));
  ASSERT_TRUE(job.model_initializer.has_value());
  EXPECT_EQ(job.model_initializer->storage_uri, "file:///models/m");
  bool secret_warned = false, ignored = false;
  for (const auto& w : parsed->warnings) {
    secret_warned |= w.find("TrainJob/j: spec.initializer.model.secretRef: ignored") == 0;
    ignored |= w.find("spec.initializer: ignored") != std::string::npos;
  }
  EXPECT_TRUE(secret_warned);
  EXPECT_FALSE(ignored);
}

}  // namespace
}  // namespace trainlet::trainjob
