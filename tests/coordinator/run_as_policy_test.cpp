// The access policy's run-as rules on held jobs (access_policy_run_as.h, issue 19): an apply that
// asks uids or gids its namespace does not allow is refused by path, naming the user and the
// namespace, and stores nothing; steps' containers are checked as the main one; admins may ask
// any; a job whose ids the policy no longer allows (it changed after the apply) fails at its
// placement with reason RunAsNotAllowed, before anything is placed.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "controller_fixture.h"
#include "coordinator/access_policy_run_as.h"
#include "coordinator/job_state_machine.h"
#include "coordinator/operator_service.h"

namespace trainlet::coordinator {
namespace {

using testing::ControllerFixture;
using ::testing::HasSubstr;
using testing::JobYaml;
using testing::RuntimeYaml;

constexpr const char* kPolicy = R"(users:
  alice: {role: admin}
  bob: {role: user, namespaces: [team-a, team-b]}
namespaces:
  team-a:
    runAsUsers: ["1000-1999", 65534]
    runAsGroups: [1000]
)";

// RuntimeYaml whose node container runs as `security_context` (a flow map), with an extra
// replicated job "prep", run after node, whose container sets `prep_context` when not empty.
std::string RunAsRuntime(const std::string& name, const std::string& security_context,
                         const std::string& prep_context = "") {
  std::string y = RuntimeYaml(name);
  y += "                      securityContext: " + security_context + "\n";
  if (!prep_context.empty()) {
    // After the training: two users at once would need one fsGroup (replicated_job_users.h).
    y += "        - name: prep\n";
    y += "          dependsOn: [{name: node, status: Complete}]\n";
    y += "          template:\n";
    y += "            spec:\n";
    y += "              template:\n";
    y += "                spec:\n";
    y += "                  containers:\n";
    y += "                    - name: prep\n";
    y += "                      command: [\"/bin/true\"]\n";
    y += "                      securityContext: " + prep_context + "\n";
  }
  return y;
}

std::string NsJob(const std::string& ns, const std::string& name, const std::string& runtime,
                  bool suspend = false) {
  std::string y = JobYaml(name, 1, 1, runtime);
  y.replace(y.find("metadata:\n"), 10, "metadata:\n  namespace: " + ns + "\n");
  if (suspend) y += "  suspend: true\n";
  return y;
}

constexpr const char* kNodePath =
    "spec.template.spec.replicatedJobs[node].template.spec.template.spec.containers[node]."
    "securityContext.";

class RunAsPolicyTest : public ControllerFixture {
 protected:
  void SetUp() override {
    ControllerFixture::SetUp();
    SetPolicy(kPolicy);
    options_.check_run_as = [this](const JobEntry& job, const std::string& user) {
      return CheckJobRunAs(policy_, job, user);
    };
    MakeController();
    service_ = std::make_unique<OperatorService>(
        controller_.get(), &registry_, &sink_,
        [this](const std::string&, v1::Envelope env) { replies_.push_back(std::move(env)); });
    service_->EnforcePolicy([this]() -> const AccessPolicy& { return policy_; });
    for (const auto& rt : {RunAsRuntime("as-root", "{runAsUser: 0}"),
                           RunAsRuntime("as-1500", "{runAsUser: 1500, runAsGroup: 1000}"),
                           RunAsRuntime("prep-root", "{runAsUser: 1500}", "{runAsUser: 0}")}) {
      ASSERT_EQ(Apply("alice", rt).error(), "");
    }
  }
  void SetPolicy(const std::string& text) {
    auto policy = AccessPolicy::Parse(text, "policy.yaml");
    ASSERT_TRUE(policy.ok()) << policy.status().message();
    policy_ = *policy;
  }
  v1::OperatorResponse Send(const std::string& user, v1::OperatorRequest req) {
    replies_.clear();
    service_->Handle("rid", req, Clock::now(), kT0 + 5, user);
    EXPECT_EQ(replies_.size(), 1u);
    return replies_.empty() ? v1::OperatorResponse{} : replies_.back().operator_response();
  }
  v1::OperatorResponse Apply(const std::string& user, const std::string& yaml) {
    v1::OperatorRequest r;
    r.mutable_apply()->set_yaml(yaml);
    r.mutable_apply()->set_source_name("f.yaml");
    return Send(user, r);
  }
  v1::OperatorResponse Resume(const std::string& user, const std::string& ns,
                              const std::string& name) {
    v1::OperatorRequest r;
    r.mutable_suspend_job()->set_name(name);
    r.mutable_suspend_job()->set_namespace_(ns);
    r.mutable_suspend_job()->set_suspend(false);
    return Send(user, r);
  }

  AccessPolicy policy_;
  std::vector<v1::Envelope> replies_;
  std::unique_ptr<OperatorService> service_;
};

TEST_F(RunAsPolicyTest, ApplyRefusesIdsTheNamespaceDoesNotAllowByPath) {
  v1::OperatorResponse r = Apply("bob", NsJob("team-a", "root", "as-root"));
  EXPECT_EQ(r.error_code(), "PermissionDenied");
  EXPECT_EQ(r.error(), std::string("TrainJob/team-a/root: ClusterTrainingRuntime/as-root: ") +
                           kNodePath +
                           "runAsUser: uid 0 is not allowed in namespace \"team-a\" for user "
                           "\"bob\" (allowed: 1000-1999, 65534)");
  EXPECT_EQ(controller_->Find("team-a.root"), nullptr);
  // One refused job refuses the file: nothing of it is stored.
  r = Apply("bob", NsJob("team-a", "ok", "as-1500") + "---\n" + NsJob("team-a", "root", "as-root"));
  EXPECT_EQ(r.error_code(), "PermissionDenied");
  EXPECT_EQ(controller_->Find("team-a.ok"), nullptr);
  EXPECT_THAT(StoredNames(), ::testing::IsEmpty());

  EXPECT_EQ(Apply("bob", NsJob("team-a", "ok", "as-1500")).error(), "");
  EXPECT_EQ(JobOrDie("team-a.ok").applied_by(), "bob");
  EXPECT_NE(PhaseOf(JobOrDie("team-a.ok")), JobPhase::kFailed);
}

// A pod's securityContext.fsGroup is a group its ranks get: runAsGroups rules it, and the
// refusal names the pod's field.
TEST_F(RunAsPolicyTest, AnFsGroupIsAGroupTheJobAsks) {
  for (const auto& [name, group] : {std::pair{"fsg-0", 0}, std::pair{"fsg-1000", 1000}}) {
    std::string rt = RunAsRuntime(name, "{runAsUser: 1500}");
    rt += "                  securityContext: {fsGroup: " + std::to_string(group) + "}\n";
    ASSERT_EQ(Apply("alice", rt).error(), "");
  }
  v1::OperatorResponse r = Apply("bob", NsJob("team-a", "g0", "fsg-0"));
  EXPECT_EQ(r.error_code(), "PermissionDenied");
  EXPECT_THAT(r.error(), HasSubstr("ClusterTrainingRuntime/fsg-0: spec.template.spec."
                                   "replicatedJobs[node].template.spec.template.spec."
                                   "securityContext.fsGroup: gid 0 is not allowed in namespace "
                                   "\"team-a\""));
  EXPECT_EQ(Apply("bob", NsJob("team-a", "g1000", "fsg-1000")).error(), "");
}

TEST_F(RunAsPolicyTest, WithoutARuleOnlyTheAgentsRunAsAndAdminsAskAny) {
  // team-b has no rule: a job may run as the agent's run_as only (no securityContext ids).
  v1::OperatorResponse r = Apply("bob", NsJob("team-b", "b", "as-1500"));
  EXPECT_EQ(r.error_code(), "PermissionDenied");
  EXPECT_THAT(r.error(), HasSubstr("runAsUser: uid 1500 is not allowed in namespace \"team-b\" "
                                   "for user \"bob\" (the access policy allows no runAsUsers"));
  EXPECT_EQ(Apply("bob", NsJob("team-b", "plain", "plain")).error(), "");
  // An admin may ask any id anywhere, and the job is placed (its placement checks alice too).
  EXPECT_EQ(Apply("alice", NsJob("team-b", "root", "as-root")).error(), "");
  EXPECT_EQ(JobOrDie("team-b.root").applied_by(), "alice");
  EXPECT_EQ(JobOrDie("team-b.root").attempt(), 1u);
}

TEST_F(RunAsPolicyTest, StepContainersAreCheckedToo) {
  v1::OperatorResponse r = Apply("bob", NsJob("team-a", "p", "prep-root"));
  EXPECT_EQ(r.error_code(), "PermissionDenied");
  EXPECT_THAT(r.error(),
              HasSubstr("ClusterTrainingRuntime/prep-root: spec.template.spec.replicatedJobs[prep]"
                        ".template.spec.template.spec.containers[prep].securityContext.runAsUser: "
                        "uid 0 is not allowed"));
}

// The policy narrowed after the apply: the job fails when it would be placed, with the reason.
TEST_F(RunAsPolicyTest, APolicyChangedAfterApplyFailsTheJobAtPlacement) {
  ASSERT_EQ(Apply("bob", NsJob("team-a", "later", "as-1500", /*suspend=*/true)).error(), "");
  SetPolicy(std::string(kPolicy).replace(std::string(kPolicy).find("\"1000-1999\", "), 13, ""));
  ASSERT_EQ(Resume("bob", "team-a", "later").error(), "");
  const v1::JobStatus& st = JobOrDie("team-a.later");
  EXPECT_EQ(PhaseOf(st), JobPhase::kFailed);
  EXPECT_EQ(st.reason(), "RunAsNotAllowed");
  EXPECT_EQ(st.attempt(), 0u);  // nothing was placed
  ASSERT_GT(st.events_size(), 0);
  const v1::JobEvent& last = st.events(st.events_size() - 1);
  EXPECT_EQ(last.reason(), "RunAsNotAllowed");
  EXPECT_THAT(last.message(), HasSubstr("uid 1500 is not allowed in namespace \"team-a\" for user "
                                        "\"bob\" (allowed: 65534)"));
  EXPECT_TRUE(sink_.sent.empty() ||
              std::none_of(sink_.sent.begin(), sink_.sent.end(),
                           [](const auto& s) { return s.second.has_launch_plan(); }));
}

}  // namespace
}  // namespace trainlet::coordinator
