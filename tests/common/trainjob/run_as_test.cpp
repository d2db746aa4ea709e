// Issue 19, "Ranks and secrets": a runtime container's securityContext.runAsUser / runAsGroup
// (else its pod's) is read, reaches the resolved trainer, and a bad value is refused by path; the
// rest of securityContext is reported as ignored.
#include <gtest/gtest.h>

#include <algorithm>

#include "common/trainjob/trainjob_model.h"

namespace trainlet::trainjob {
namespace {

std::string Runtime(const std::string& container_extra, const std::string& pod_extra = "") {
  return "apiVersion: trainer.kubeflow.org/v1alpha1\n"
         "kind: ClusterTrainingRuntime\n"
         "metadata: {name: rt}\n"
         "spec:\n"
         "  template:\n"
         "    spec:\n"
         "      replicatedJobs:\n"
         "        - name: node\n"
         "          template: {spec: {template: {spec: {" +
         pod_extra + "containers: [{name: node, command: [train]" + container_extra + "}]}}}}\n";
}

bool Warned(const ParsedFile& f, const std::string& part) {
  return std::any_of(f.warnings.begin(), f.warnings.end(),
                     [&](const std::string& w) { return w.find(part) != std::string::npos; });
}

TEST(RunAsTest, ContainerSecurityContextIsReadAndResolved) {
  auto f = ParseDocuments(
      Runtime(", securityContext: {runAsUser: 65534, runAsGroup: 65533, privileged: true}"));
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  const auto& node = *f->runtimes[0].node;
  EXPECT_EQ(node.run_as_user, 65534);
  EXPECT_EQ(node.run_as_group, 65533);
  EXPECT_TRUE(Warned(*f, "securityContext.privileged: ignored"))
      << ::testing::PrintToString(f->warnings);
  EXPECT_FALSE(Warned(*f, "securityContext.runAsUser")) << ::testing::PrintToString(f->warnings);
  TrainJob job;
  job.name = "x";
  job.runtime_ref.name = "rt";
  auto r = Resolve(job, f->runtimes[0]);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->run_as_user, 65534);
  EXPECT_EQ(r->run_as_group, 65533);
}

TEST(RunAsTest, ThePodsHoldsWhereTheContainerSetsNone) {
  auto f = ParseDocuments(Runtime(", securityContext: {runAsGroup: 7}",
                                  "securityContext: {runAsUser: 1000, runAsGroup: 8}, "));
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  const auto& node = *f->runtimes[0].node;
  EXPECT_EQ(node.run_as_user, 1000);
  EXPECT_EQ(node.run_as_group, 7);  // the container's own wins
  EXPECT_FALSE(Warned(*f, "spec.securityContext: ignored"))
      << ::testing::PrintToString(f->warnings);
}

// The pod's fsGroup (Kubernetes' PodSecurityContext; a container has none): read, resolved, and
// a bad value refused by path. A container's fsGroup is ignored with a warning.
TEST(RunAsTest, ThePodsFsGroupIsReadAndResolved) {
  auto f = ParseDocuments(Runtime(", securityContext: {runAsUser: 1000, fsGroup: 9}",
                                  "securityContext: {fsGroup: 4242}, "));
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->runtimes[0].node->fs_group, 4242);
  EXPECT_TRUE(Warned(*f, "containers[0].securityContext.fsGroup: ignored"))
      << ::testing::PrintToString(f->warnings);
  EXPECT_FALSE(Warned(*f, "spec.securityContext.fsGroup")) << ::testing::PrintToString(f->warnings);
  TrainJob job;
  job.name = "x";
  job.runtime_ref.name = "rt";
  auto r = Resolve(job, f->runtimes[0]);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->fs_group, 4242);
  auto bad = ParseDocuments(Runtime("", "securityContext: {fsGroup: -1}, "));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("spec.securityContext.fsGroup"), std::string::npos)
      << bad.status().message();
}

TEST(RunAsTest, UnsetIsUnset) {
  auto f = ParseDocuments(Runtime(""));
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_FALSE(f->runtimes[0].node->run_as_user.has_value());
  EXPECT_FALSE(f->runtimes[0].node->run_as_group.has_value());
  EXPECT_FALSE(f->runtimes[0].node->fs_group.has_value());
}

TEST(RunAsTest, ABadIdIsRefusedByPath) {
  for (const char* bad : {"-1", "abc", "4294967295"}) {
    auto f = ParseDocuments(Runtime(std::string(", securityContext: {runAsUser: ") + bad + "}"));
    ASSERT_FALSE(f.ok()) << bad;
    EXPECT_NE(f.status().message().find("containers[0].securityContext.runAsUser"),
              std::string::npos)
        << f.status().message();
  }
}

// allowPrivilegeEscalation (a container's): no_new_privs is the default, true opts out.
TEST(RunAsTest, AllowPrivilegeEscalationIsReadAndResolved) {
  auto f = ParseDocuments(Runtime(", securityContext: {allowPrivilegeEscalation: true}"));
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->runtimes[0].node->allow_privilege_escalation, true);
  EXPECT_FALSE(Warned(*f, "allowPrivilegeEscalation")) << ::testing::PrintToString(f->warnings);
  TrainJob job;
  job.name = "x";
  job.runtime_ref.name = "rt";
  auto r = Resolve(job, f->runtimes[0]);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->allow_privilege_escalation, true);

  f = ParseDocuments(Runtime(", securityContext: {allowPrivilegeEscalation: false}"));
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->runtimes[0].node->allow_privilege_escalation, false);
  EXPECT_FALSE(ParseDocuments(Runtime("")).value().runtimes[0].node->allow_privilege_escalation);

  f = ParseDocuments(Runtime(", securityContext: {allowPrivilegeEscalation: maybe}"));
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("containers[0].securityContext.allowPrivilegeEscalation"),
            std::string::npos)
      << f.status().message();
  // A pod has no such field (Kubernetes' PodSecurityContext): reported as ignored there.
  f = ParseDocuments(Runtime("", "securityContext: {allowPrivilegeEscalation: true}, "));
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_FALSE(f->runtimes[0].node->allow_privilege_escalation.has_value());
  EXPECT_TRUE(Warned(*f, "spec.securityContext.allowPrivilegeEscalation: ignored"))
      << ::testing::PrintToString(f->warnings);
}

}  // namespace
}  // namespace trainlet::trainjob
