// Issue 18, "Working directory": a runtime container's workingDir is read (node, and the launcher's
// for mpi), no longer reported as ignored, and reaches the resolved trainer; a TrainJob's runtime
// patch cannot set it (Kubeflow's schema has no such field there).
#include <gtest/gtest.h>

#include <algorithm>

#include "common/trainjob/trainjob_model.h"

namespace trainlet::trainjob {
namespace {

std::string Runtime(const std::string& node_extra, const std::string& launcher = "") {
  std::string out =
      "apiVersion: trainer.kubeflow.org/v1alpha1\n"
      "kind: ClusterTrainingRuntime\n"
      "metadata: {name: rt}\n"
      "spec:\n"
      "  template:\n"
      "    spec:\n"
      "      replicatedJobs:\n";
  if (!launcher.empty()) {
    out +=
        "        - name: launcher\n"
        "          template: {spec: {template: {spec: {containers: [{name: node, command: "
        "[mpirun], " +
        launcher + "}]}}}}\n";
  }
  out +=
      "        - name: node\n"
      "          template: {spec: {template: {spec: {containers: [{name: node, command: [train]" +
      node_extra + "}]}}}}\n";
  return out;
}

bool Warned(const ParsedFile& f, const std::string& part) {
  return std::any_of(f.warnings.begin(), f.warnings.end(),
                     [&](const std::string& w) { return w.find(part) != std::string::npos; });
}

TEST(WorkingDirTest, NodeContainerWorkingDirIsReadAndNotIgnored) {
  auto f = ParseDocuments(Runtime(", workingDir: out/run"));
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  ASSERT_TRUE(f->runtimes[0].node.has_value());
  EXPECT_EQ(f->runtimes[0].node->working_dir, "out/run");
  EXPECT_FALSE(Warned(*f, "workingDir")) << ::testing::PrintToString(f->warnings);
}

TEST(WorkingDirTest, UnsetIsEmpty) {
  auto f = ParseDocuments(Runtime(""));
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->runtimes[0].node->working_dir, "");
}

TEST(WorkingDirTest, NulIsRefusedByPath) {
  auto f = ParseDocuments(Runtime(", workingDir: \"a\\0b\""));
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("containers[0].workingDir: must not contain a NUL byte"),
            std::string::npos)
      << f.status().message();
}

TEST(WorkingDirTest, ResolveTakesTheNodeContainersOrTheLaunchers) {
  auto f = ParseDocuments(Runtime(", workingDir: /srv/node"));
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  TrainJob job;
  job.name = "x";
  job.runtime_ref.name = "rt";
  auto r = Resolve(job, f->runtimes[0]);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->working_dir, "/srv/node");

  // With a launcher (mpi), the launcher runs the command, in its own workingDir.
  f = ParseDocuments(Runtime(", workingDir: /srv/node", "workingDir: launch"));
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  ASSERT_TRUE(f->runtimes[0].launcher.has_value());
  r = Resolve(job, f->runtimes[0]);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->working_dir, "launch");
}

TEST(WorkingDirTest, ARuntimePatchCannotSetIt) {
  // Kubeflow's TrainJob CRD lets a patch's container set env, name, securityContext and
  // volumeMounts only: the API server prunes a workingDir there, and trainlet says it ignores it.
  const std::string job =
      "apiVersion: trainer.kubeflow.org/v1alpha1\n"
      "kind: TrainJob\n"
      "metadata: {name: x}\n"
      "spec:\n"
      "  runtimeRef: {name: rt}\n"
      "  runtimePatches:\n"
      "    - manager: me\n"
      "      trainingRuntimeSpec:\n"
      "        template:\n"
      "          spec:\n"
      "            replicatedJobs:\n"
      "              - name: node\n"
      "                template: {spec: {template: {spec: {containers: "
      "[{name: node, workingDir: /elsewhere}]}}}}\n";
  auto f = ParseDocuments(job);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_TRUE(Warned(*f, "containers[0].workingDir")) << ::testing::PrintToString(f->warnings);
}

}  // namespace
}  // namespace trainlet::trainjob
