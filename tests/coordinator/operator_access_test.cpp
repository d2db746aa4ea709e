// OperatorService under an access policy (access_policy.h), with jobs in two namespaces: each
// refusal, what admins may do, namespaced names and keys, and the user named in job events.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "controller_fixture.h"
#include "coordinator/job_key.h"
#include "coordinator/operator_service.h"

namespace trainlet::coordinator {
namespace {

using ::testing::Contains;
using testing::ControllerFixture;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::JobYaml;

constexpr const char* kPolicy = R"(users:
  alice: {role: admin}
  bob: {role: user, namespaces: [team-a]}
  carol: {role: user, namespaces: [team-b]}
)";

// JobYaml in namespace `ns`.
std::string NsJob(const std::string& ns, const std::string& name, int nodes = 1) {
  std::string y = JobYaml(name, nodes, 1);
  y.replace(y.find("metadata:\n"), 10, "metadata:\n  namespace: " + ns + "\n");
  return y;
}

class OperatorAccessTest : public ControllerFixture {
 protected:
  void SetUp() override {
    ControllerFixture::SetUp();
    auto policy = AccessPolicy::Parse(kPolicy, "policy.yaml");
    ASSERT_TRUE(policy.ok()) << policy.status().message();
    policy_ = *policy;
    service_ = std::make_unique<OperatorService>(
        controller_.get(), &registry_, &sink_,
        [this](const std::string&, v1::Envelope env) { replies_.push_back(std::move(env)); });
    service_->EnforcePolicy([this]() -> const AccessPolicy& { return policy_; });
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
  v1::OperatorResponse Delete(const std::string& user, const std::string& ns,
                              const std::string& name) {
    v1::OperatorRequest r;
    r.mutable_delete_job()->set_name(name);
    r.mutable_delete_job()->set_namespace_(ns);
    return Send(user, r);
  }
  v1::OperatorResponse Suspend(const std::string& user, const std::string& ns,
                               const std::string& name, bool suspend) {
    v1::OperatorRequest r;
    r.mutable_suspend_job()->set_name(name);
    r.mutable_suspend_job()->set_namespace_(ns);
    r.mutable_suspend_job()->set_suspend(suspend);
    return Send(user, r);
  }
  v1::OperatorResponse Get(const std::string& user, const std::string& ns,
                           const std::string& name = "", bool all = false) {
    v1::OperatorRequest r;
    r.mutable_get_jobs()->set_name(name);
    r.mutable_get_jobs()->set_namespace_(ns);
    r.mutable_get_jobs()->set_all_namespaces(all);
    return Send(user, r);
  }
  v1::OperatorResponse Logs(const std::string& user, const std::string& ns,
                            const std::string& name) {
    v1::OperatorRequest r;
    r.mutable_logs()->set_job(name);
    r.mutable_logs()->set_namespace_(ns);
    return Send(user, r);
  }
  static void ExpectRefused(const v1::OperatorResponse& r, const std::string& message) {
    EXPECT_EQ(r.error_code(), "PermissionDenied") << r.error();
    EXPECT_EQ(r.error(), message);
  }
  // Both teams' jobs, applied by an admin.
  void TwoTeams() {
    ASSERT_EQ(Apply("alice", NsJob("team-a", "a1")).error(), "");
    ASSERT_EQ(Apply("alice", NsJob("team-b", "b1")).error(), "");
  }
  static std::vector<std::string> EventMessages(const v1::JobStatus& st) {
    std::vector<std::string> out;
    for (const auto& e : st.events()) out.push_back(e.reason() + ": " + e.message());
    return out;
  }

  AccessPolicy policy_;
  std::vector<v1::Envelope> replies_;
  std::unique_ptr<OperatorService> service_;
};

TEST_F(OperatorAccessTest, JobsAreKeyedByNamespaceAndShownByName) {
  TwoTeams();
  ASSERT_EQ(Apply("alice", NsJob("default", "d1")).error(), "");
  EXPECT_NE(controller_->Find("team-a.a1"), nullptr);
  EXPECT_NE(controller_->Find("d1"), nullptr);  // default: the bare name, as before namespaces
  EXPECT_EQ(JobOrDie("team-a.a1").namespace_(), "team-a");

  v1::OperatorResponse one = Get("bob", "team-a", "a1");
  ASSERT_EQ(one.jobs().jobs_size(), 1);
  EXPECT_EQ(one.jobs().jobs(0).name(), "a1");
  EXPECT_EQ(one.jobs().jobs(0).namespace_(), "team-a");
  EXPECT_EQ(Get("bob", "team-b", "a1").error(), "trainjob/team-b/a1 not found");

  auto names = [](const v1::OperatorResponse& r) {
    std::vector<std::string> out;
    for (const auto& j : r.jobs().jobs()) out.push_back(j.namespace_() + "/" + j.name());
    return out;
  };
  EXPECT_THAT(names(Get("bob", "team-a")), ElementsAre("team-a/a1"));
  EXPECT_THAT(names(Get("bob", "")), ElementsAre("default/d1"));
  EXPECT_THAT(names(Get("bob", "", "", true)), ElementsAre("team-a/a1", "team-b/b1", "default/d1"));
  // An apply's answer names the namespace outside default.
  EXPECT_THAT(Apply("bob", NsJob("team-a", "a2")).apply().created(),
              ElementsAre("trainjob/team-a/a2"));
}

TEST_F(OperatorAccessTest, NamespacedJobsKeepTheirKeyAndNamespaceAcrossARestart) {
  TwoTeams();
  ASSERT_TRUE(controller_->Flush().ok());
  EXPECT_THAT(StoredNames(), ::testing::UnorderedElementsAre("team-a.a1", "team-b.b1"));
  MakeController();  // a coordinator restart: reloaded from the store
  service_ = std::make_unique<OperatorService>(
      controller_.get(), &registry_, &sink_,
      [this](const std::string&, v1::Envelope env) { replies_.push_back(std::move(env)); });
  service_->EnforcePolicy([this]() -> const AccessPolicy& { return policy_; });
  EXPECT_EQ(JobOrDie("team-a.a1").namespace_(), "team-a");
  v1::OperatorResponse r = Get("bob", "team-a", "a1");
  ASSERT_EQ(r.jobs().jobs_size(), 1);
  EXPECT_EQ(r.jobs().jobs(0).name(), "a1");
  ExpectRefused(Delete("bob", "team-b", "b1"),
                "user \"bob\" may not delete trainjobs in namespace \"team-b\"");
  // Re-applying the same document is no change: it is found by its key.
  EXPECT_THAT(Apply("bob", NsJob("team-a", "a1")).apply().unchanged(),
              ElementsAre("trainjob/team-a/a1"));
}

TEST_F(OperatorAccessTest, UserAppliesOnlyInTheirNamespaceAndWholeFilesAreRefused) {
  v1::OperatorResponse r = Apply("bob", NsJob("team-b", "b1"));
  ExpectRefused(r, "user \"bob\" may not apply trainjobs in namespace \"team-b\"");
  // One document out of bounds refuses the file: nothing of it is stored.
  r = Apply("bob", NsJob("team-a", "a1") + "---\n" + NsJob("team-b", "b2"));
  ExpectRefused(r, "user \"bob\" may not apply trainjobs in namespace \"team-b\"");
  EXPECT_EQ(controller_->Find("team-a.a1"), nullptr);
  EXPECT_TRUE(StoredNames().empty());
  // Unset metadata.namespace is "default", which bob is not granted.
  ExpectRefused(Apply("bob", JobYaml("d1", 1, 1)),
                "user \"bob\" may not apply trainjobs in namespace \"default\"");

  r = Apply("bob", NsJob("team-a", "a1"));
  EXPECT_EQ(r.error(), "");
  EXPECT_THAT(EventMessages(JobOrDie("team-a.a1")),
              Contains("Created: applied from f.yaml by bob"));
}

// Kueue's queue objects (issue 14): applied and deleted by admins only, listed by anyone the
// policy names; a refused file stores none of them.
TEST_F(OperatorAccessTest, QueueObjectsAreForAdminsOnly) {
  const std::string cq =
      "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {name: team-a}\n"
      "spec: {}\n";
  const std::string lq =
      "apiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\nmetadata: {name: q, namespace: "
      "team-a}\nspec: {clusterQueue: team-a}\n";
  ExpectRefused(Apply("bob", cq), "user \"bob\" may not apply clusterqueues (admins only)");
  ExpectRefused(Apply("bob", NsJob("team-a", "a1") + "---\n" + lq),
                "user \"bob\" may not apply localqueues (admins only) in namespace \"team-a\"");
  EXPECT_EQ(controller_->Find("team-a.a1"), nullptr);
  EXPECT_EQ(controller_->queues().size(), 0u);
  EXPECT_EQ(Apply("alice", cq + "---\n" + lq).error(), "");

  v1::OperatorRequest list;
  list.mutable_queue_objects()->set_kind("ClusterQueue");
  v1::OperatorResponse r = Send("carol", list);
  EXPECT_EQ(r.error(), "");
  EXPECT_EQ(r.queue_objects().objects_size(), 1);

  v1::OperatorRequest del = list;
  del.mutable_queue_objects()->set_name("team-a");
  del.mutable_queue_objects()->set_remove(true);
  ExpectRefused(Send("bob", del), "user \"bob\" may not apply clusterqueues (admins only)");
  EXPECT_NE(controller_->queues().FindClusterQueue("team-a"), nullptr);
  EXPECT_EQ(Send("alice", del).error(), "");
  EXPECT_EQ(controller_->queues().FindClusterQueue("team-a"), nullptr);
}

TEST_F(OperatorAccessTest, RuntimesAreForAdminsOnly) {
  const std::string rt = testing::RuntimeYaml("mine");
  ExpectRefused(Apply("bob", rt),
                "user \"bob\" may not apply clustertrainingruntimes (admins only)");
  std::string namespaced = rt;
  namespaced.replace(namespaced.find("kind: ClusterTrainingRuntime"), 28, "kind: TrainingRuntime");
  namespaced.replace(namespaced.find("metadata:\n"), 10, "metadata:\n  namespace: team-a\n");
  ExpectRefused(
      Apply("bob", namespaced),
      "user \"bob\" may not apply trainingruntimes (admins only) in namespace \"team-a\"");
  EXPECT_EQ(Apply("alice", namespaced).error(), "");

  // A TrainJob's TrainingRuntime is looked up in the job's own namespace.
  std::string job = NsJob("team-a", "on-mine");
  job.replace(job.find("    name: plain\n"), 16, "    kind: TrainingRuntime\n    name: mine\n");
  EXPECT_EQ(Apply("bob", job).error(), "");
  std::string other = job;
  other.replace(other.find("namespace: team-a"), 17, "namespace: team-b");
  v1::OperatorResponse r = Apply("carol", other);
  EXPECT_EQ(r.error_code(), "NotFound");
  EXPECT_THAT(r.error(), HasSubstr("TrainingRuntime \"mine\" in namespace \"team-b\" not found"));
}

TEST_F(OperatorAccessTest, UserChangesOnlyTheirNamespacesJobsButReadsEveryStatus) {
  TwoTeams();
  ExpectRefused(Delete("bob", "team-b", "b1"),
                "user \"bob\" may not delete trainjobs in namespace \"team-b\"");
  ExpectRefused(Suspend("bob", "team-b", "b1", true),
                "user \"bob\" may not suspend trainjobs in namespace \"team-b\"");
  ExpectRefused(Suspend("bob", "team-b", "b1", false),
                "user \"bob\" may not resume trainjobs in namespace \"team-b\"");
  ExpectRefused(Logs("bob", "team-b", "b1"),
                "user \"bob\" may not read logs of trainjobs in namespace \"team-b\"");
  EXPECT_NE(controller_->Find("team-b.b1"), nullptr);

  v1::OperatorResponse status = Get("bob", "team-b", "b1");
  EXPECT_EQ(status.error(), "");
  EXPECT_EQ(status.jobs().jobs(0).name(), "b1");
  v1::OperatorRequest wait;
  wait.mutable_wait_job()->set_name("b1");
  wait.mutable_wait_job()->set_namespace_("team-b");
  wait.mutable_wait_job()->set_condition(PhaseName(JobOrDie("team-b.b1")));  // met now
  v1::OperatorResponse waited = Send("bob", wait);
  EXPECT_EQ(waited.error(), "");
  EXPECT_TRUE(waited.wait_job().met());
  EXPECT_EQ(waited.wait_job().job().name(), "b1");

  // In their own namespace, every change names them in the job's events.
  EXPECT_EQ(Suspend("bob", "team-a", "a1", true).error(), "");
  EXPECT_EQ(Suspend("bob", "team-a", "a1", false).error(), "");
  // A log read of its own namespace goes to the agent holding it (answered when it replies),
  // by the job's key.
  ReportAll("team-a.a1", v1::WorkerEvent::KIND_STARTED, kT0 + 6);
  v1::OperatorRequest logs;
  logs.mutable_logs()->set_job("a1");
  logs.mutable_logs()->set_namespace_("team-a");
  replies_.clear();
  sink_.sent.clear();
  service_->Handle("rid", logs, Clock::now(), kT0 + 7, "bob");
  EXPECT_TRUE(replies_.empty());
  ASSERT_EQ(sink_.sent.size(), 1u);
  EXPECT_EQ(sink_.sent[0].second.log_read().job(), "team-a.a1");
  v1::OperatorResponse deleted = Delete("bob", "team-a", "a1");
  EXPECT_EQ(deleted.error(), "");
  EXPECT_EQ(deleted.delete_job().name(), "a1");
  const v1::JobStatus* a1 = controller_->Find("team-a.a1");
  if (a1 != nullptr) {  // still stopping: its events say who asked
    EXPECT_THAT(EventMessages(*a1), Contains(HasSubstr("suspended by bob (trainletctl suspend)")));
    EXPECT_THAT(EventMessages(*a1), Contains(HasSubstr("resumed by bob (trainletctl resume)")));
    EXPECT_THAT(EventMessages(*a1),
                Contains("Deleting: delete requested by bob; stopping every rank"));
  }
}

TEST_F(OperatorAccessTest, AdminActsEverywhereAndDrainsNamingThemself) {
  TwoTeams();
  ASSERT_GT(JobOrDie("team-b.b1").attempt(), 0u);
  ReportAll("team-b.b1", v1::WorkerEvent::KIND_STARTED, kT0 + 6);
  const std::string node = JobOrDie("team-b.b1").ranks(0).node();

  v1::OperatorRequest drain;
  drain.mutable_drain_node()->set_node(node);
  drain.mutable_drain_node()->set_force(true);
  ExpectRefused(Send("bob", drain), "user \"bob\" may not drain nodes");
  v1::OperatorRequest cordon;
  cordon.mutable_cordon_node()->set_node(node);
  cordon.mutable_cordon_node()->set_cordon(true);
  ExpectRefused(Send("carol", cordon), "user \"carol\" may not cordon nodes");

  v1::OperatorResponse drained = Send("alice", drain);
  EXPECT_EQ(drained.error(), "");
  EXPECT_THAT(drained.drain_node().stopped(), Contains("team-b/b1"));
  EXPECT_THAT(EventMessages(JobOrDie("team-b.b1")),
              Contains(HasSubstr("node drained (" + node + ") by alice")));
  // b1 had no restarts left: its messages name it as users do.
  EXPECT_EQ(Suspend("alice", "team-b", "b1", true).error(),
            "trainjob/team-b/b1 is Failed: a finished job cannot be suspended");
  ASSERT_EQ(Apply("alice", NsJob("team-b", "b3")).error(), "");
  EXPECT_EQ(Suspend("alice", "team-b", "b3", true).error(), "");
  EXPECT_THAT(EventMessages(JobOrDie("team-b.b3")),
              Contains(HasSubstr("suspended by alice (trainletctl suspend)")));
  EXPECT_EQ(Delete("alice", "team-a", "a1").error(), "");
}

TEST_F(OperatorAccessTest, UnknownUserIsRefusedEverything) {
  TwoTeams();
  v1::OperatorResponse r = Get("mallory", "team-a", "a1");
  EXPECT_EQ(r.error_code(), "PermissionDenied");
  EXPECT_THAT(r.error(), HasSubstr("user \"mallory\" may not get trainjobs"));
  v1::OperatorRequest nodes;
  nodes.mutable_get_nodes();
  EXPECT_EQ(Send("mallory", nodes).error_code(), "PermissionDenied");
  EXPECT_EQ(Apply("mallory", NsJob("team-a", "m1")).error(),
            "user \"mallory\" may not apply trainjobs (the access policy does not name the user)");
  EXPECT_EQ(Apply("mallory", "not: [yaml").error_code(), "PermissionDenied");
  EXPECT_EQ(Delete("mallory", "team-a", "a1").error_code(), "PermissionDenied");
  EXPECT_EQ(controller_->Find("team-a.m1"), nullptr);
}

// A job key is "<namespace>.<name>" outside default (job_key.h): a name with a '.' in namespace
// default is another namespace's key. A user of default must not reach team-b's job so, through
// any verb that names a job; the name is refused as a name, before anything is looked up.
TEST_F(OperatorAccessTest, ADottedNameReachesNoOtherNamespacesJob) {
  TwoTeams();
  auto policy = AccessPolicy::Parse(
      std::string(kPolicy) + "  dan: {role: user, namespaces: [default, team-a]}\n", "policy.yaml");
  ASSERT_TRUE(policy.ok()) << policy.status().message();
  policy_ = *policy;
  const std::string refused =
      "trainjob name \"team-b.b1\": must be a lowercase RFC 1035 label (a letter, then letters, "
      "digits or '-', at most 63 characters); a job of another namespace is named with -n";
  for (const std::string ns : {"", "default"}) {
    v1::OperatorResponse r = Delete("dan", ns, "team-b.b1");
    EXPECT_EQ(r.error_code(), "Invalid") << r.error();
    EXPECT_EQ(r.error(), refused);
    EXPECT_EQ(Suspend("dan", ns, "team-b.b1", true).error(), refused);
    EXPECT_EQ(Suspend("dan", ns, "team-b.b1", false).error(), refused);
    EXPECT_EQ(Logs("dan", ns, "team-b.b1").error(), refused);
    EXPECT_EQ(Get("dan", ns, "team-b.b1").error(), refused);
    v1::OperatorRequest wait;
    wait.mutable_wait_job()->set_name("team-b.b1");
    wait.mutable_wait_job()->set_namespace_(ns);
    wait.mutable_wait_job()->set_condition("Complete");
    EXPECT_EQ(Send("dan", wait).error(), refused);
    v1::OperatorRequest check;
    check.mutable_admit_check()->set_name("team-b.b1");
    check.mutable_admit_check()->set_namespace_(ns);
    check.mutable_admit_check()->set_check("budget");
    EXPECT_EQ(Send("alice", check).error(), refused);
  }
  // A namespace is a label too (checked after who may act in it, as Kubernetes authorizes first).
  EXPECT_EQ(Delete("dan", "team-a.x", "b1").error_code(), "PermissionDenied");
  EXPECT_EQ(Delete("alice", "team-b.x", "b1").error(),
            "namespace \"team-b.x\": must be a lowercase RFC 1123 label (letters, digits and '-', "
            "at most 63 characters)");
  const v1::JobStatus& b1 = JobOrDie("team-b.b1");
  EXPECT_THAT(EventMessages(b1), ::testing::Not(Contains(HasSubstr("by dan"))));
  // His own namespaces still work by name.
  EXPECT_EQ(Suspend("dan", "team-a", "a1", true).error(), "");
}

TEST_F(OperatorAccessTest, WithoutAPolicyEveryoneIsAdmin) {
  service_->EnforcePolicy([]() -> const AccessPolicy& {
    static const AccessPolicy kAll = AccessPolicy::AllAdmin();
    return kAll;
  });
  EXPECT_EQ(Apply("anyone", NsJob("team-b", "b1")).error(), "");
  EXPECT_EQ(Delete("anyone", "team-b", "b1").error(), "");
}

}  // namespace
}  // namespace trainlet::coordinator
