// Kueue's ClusterQueue fields that go beyond quota, through a real JobController and SQLite store
// (coordinator/job_admitter.h, admission_step.h, admission_flavors.h):
//  - admissionChecks: a job's quota is reserved, but it is placed only once an admin marked every
//    check Ready (JobController::AdmitCheck, `trainletctl admit-check`); the admin's name is in
//    the events, the Ready checks are stored;
//  - a ResourceFlavor's nodeTaints keep jobs that do not tolerate them off the flavor;
//  - flavorFungibility whenCanPreempt: Preempt keeps a job on the first flavor;
//  - through OperatorService: only admins may mark a check Ready.
#include <gtest/gtest.h>

#include <string>

#include "controller_fixture.h"
#include "coordinator/access_policy.h"
#include "coordinator/operator_service.h"

namespace trainlet::coordinator {
namespace {

// ClusterQueue research: `spec_extra` is added to its spec; flavors f1 and f2 of 1 cpu each.
std::string Queues(const std::string& spec_extra, const std::string& f1_spec = "{}") {
  return R"(
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: f1}
spec: )" +
         f1_spec + R"(
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: f2}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: research}
spec:
  namespaceSelector: {}
)" + spec_extra +
         R"(
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: f1
      resources:
      - {name: cpu, nominalQuota: 1}
    - name: f2
      resources:
      - {name: cpu, nominalQuota: 1}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {namespace: default, name: lq}
spec: {clusterQueue: research}
)";
}

std::string Job(const std::string& name) {
  return "apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata:\n  name: " + name +
         "\n  labels:\n    kueue.x-k8s.io/queue-name: lq\nspec:\n  runtimeRef: {name: plain}\n"
         "  trainer:\n    numNodes: 1\n    resourcesPerNode: {requests: {cpu: \"1\"}}\n"
         "    command: [\"true\"]\n";
}

bool HasEvent(const v1::JobStatus& st, const std::string& reason, const std::string& text) {
  for (const auto& e : st.events()) {
    if (e.reason() == reason && e.message().find(text) != std::string::npos) return true;
  }
  return false;
}

class AdmissionChecksTest : public testing::ControllerFixture {
 protected:
  void SetUp() override {
    testing::ControllerFixture::SetUp();
    v1::NodeInfo info;  // 8 cpus: quota binds, not room
    info.set_name("cpu-node");
    info.set_address("127.0.0.9");
    info.set_hostname("cpu-node");
    info.set_slots(8);
    (*info.mutable_allocatable())["cpu"] = 8;
    ASSERT_TRUE(registry_.Register(info, "rid-cpu", "key-cpu", Clock::now(), kT0).ok());
  }
};

TEST_F(AdmissionChecksTest, AJobHoldsItsQuotaButWaitsForItsChecksUntilAnAdminMarksThemReady) {
  ApplyOk(Queues("  admissionChecks: [budget, security]"));
  ApplyOk(Job("first"));
  controller_->Schedule(kT0);
  {
    const v1::JobStatus& st = JobOrDie("first");
    ASSERT_TRUE(st.has_admission());      // quota reserved...
    EXPECT_EQ(PhaseName(st), "Pending");  // ...not placed
    EXPECT_TRUE(st.ranks().empty());
    EXPECT_EQ(st.queue_wait().kind(), "AdmissionCheck");
    EXPECT_NE(st.queue_wait().message().find("waiting for admission checks budget, security"),
              std::string::npos)
        << st.queue_wait().message();
    EXPECT_TRUE(HasEvent(st, "QuotaReserved", "Quota reserved in ClusterQueue research"));
  }
  EXPECT_TRUE(sink_.Plans().empty());

  auto r = controller_->AdmitCheck("first", "budget", kT0 + 100, "alice");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->changed());
  ASSERT_EQ(r->waiting_size(), 1);
  EXPECT_EQ(r->waiting(0), "security");
  EXPECT_TRUE(HasEvent(JobOrDie("first"), "AdmissionCheckReady",
                       "Admission check budget marked Ready by alice"));
  controller_->Schedule(kT0 + 200);
  EXPECT_EQ(PhaseName(JobOrDie("first")), "Pending");  // security is not Ready yet
  EXPECT_TRUE(sink_.Plans().empty());
  // Stored before it returned: a restarted coordinator keeps the admin's word.
  auto stored = Stored("first");
  ASSERT_TRUE(stored.has_value());
  ASSERT_EQ(stored->status.admission_checks_ready_size(), 1);

  r = controller_->AdmitCheck("first", "budget", kT0 + 300, "alice");
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->changed());

  r = controller_->AdmitCheck("first", "security", kT0 + 400, "bob");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->waiting_size(), 0);
  const v1::JobStatus& st = JobOrDie("first");
  EXPECT_EQ(PhaseName(st), "Starting");  // placed at once
  EXPECT_FALSE(st.has_queue_wait());
  EXPECT_TRUE(HasEvent(st, "Admitted", "every admission check is Ready"));
  EXPECT_EQ(sink_.Plans().size(), 1u);
}

TEST_F(AdmissionChecksTest, ACheckTheClusterQueueDoesNotHaveIsRefused) {
  ApplyOk(Queues("  admissionChecks: [budget]"));
  ApplyOk(Job("first"));
  controller_->Schedule(kT0);
  auto r = controller_->AdmitCheck("first", "nope", kT0 + 1, "alice");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "trainjob/first: ClusterQueue research has no admission check nope (it has budget)");
  EXPECT_EQ(controller_->AdmitCheck("ghost", "budget", kT0 + 1, "alice").status().code(),
            ErrorCode::kNotFound);
}

TEST_F(AdmissionChecksTest, AStrategyCheckAppliesOnlyOnItsFlavors) {
  ApplyOk(Queues(
      "  admissionChecksStrategy:\n    admissionChecks:\n    - {name: gpu-budget, onFlavors: "
      "[f2]}"));
  ApplyOk(Job("on-f1"));
  ApplyOk(Job("on-f2"));
  controller_->Schedule(kT0);
  EXPECT_EQ(PhaseName(JobOrDie("on-f1")), "Starting");  // f1: no check
  const v1::JobStatus& f2 = JobOrDie("on-f2");
  ASSERT_TRUE(f2.has_admission());
  EXPECT_EQ(f2.admission().resources(0).flavor(), "f2");
  EXPECT_EQ(PhaseName(f2), "Pending");
  EXPECT_EQ(f2.queue_wait().kind(), "AdmissionCheck");
}

TEST_F(AdmissionChecksTest, AFlavorTaintKeepsJobsThatDoNotTolerateItOff) {
  ApplyOk(Queues("", "{nodeTaints: [{key: dedicated, value: ml, effect: NoSchedule}]}"));
  ApplyOk(Job("first"));
  controller_->Schedule(kT0);
  const v1::JobStatus& st = JobOrDie("first");
  ASSERT_TRUE(st.has_admission());
  EXPECT_EQ(st.admission().resources(0).flavor(), "f2");  // f1 is tainted
  ApplyOk(Job("second"));
  controller_->Schedule(kT0 + 2000);
  // f2 is full and f1 is not for it: it waits rather than taking f1.
  EXPECT_FALSE(JobOrDie("second").has_admission());
}

TEST_F(AdmissionChecksTest, WhenCanPreemptPreemptKeepsAJobOnItsFirstFlavor) {
  ApplyOk(
      Queues("  flavorFungibility: {whenCanPreempt: Preempt}\n"
             "  preemption: {withinClusterQueue: LowerPriority}"));
  ApplyOk(Job("first"));
  controller_->Schedule(kT0);
  EXPECT_EQ(JobOrDie("first").admission().resources(0).flavor(), "f1");
  ApplyOk(Job("second"));
  controller_->Schedule(kT0 + 2000);
  // f2 is free, but f1 could be had by preempting: Preempt stays on f1 (no victim of lower
  // priority, so it waits). Kueue's default, TryNextFlavor, would take f2.
  const v1::JobStatus& second = JobOrDie("second");
  EXPECT_FALSE(second.has_admission());
  EXPECT_EQ(second.queue_wait().kind(), "Quota");
}

TEST_F(AdmissionChecksTest, OnlyAdminsMarkAChecksReadyThroughTheOperatorService) {
  auto policy = AccessPolicy::Parse(
      "users:\n  alice: {role: admin}\n  bob: {role: user, namespaces: [default]}\n",
      "policy.yaml");
  ASSERT_TRUE(policy.ok()) << policy.status().message();
  std::vector<v1::Envelope> replies;
  OperatorService service(
      controller_.get(), &registry_, &sink_,
      [&](const std::string&, v1::Envelope env) { replies.push_back(std::move(env)); });
  service.EnforcePolicy([&]() -> const AccessPolicy& { return *policy; });
  auto send = [&](const std::string& user) {
    v1::OperatorRequest req;
    req.mutable_admit_check()->set_name("first");
    req.mutable_admit_check()->set_check("budget");
    replies.clear();
    service.Handle("rid", req, Clock::now(), kT0 + 5, user);
    EXPECT_EQ(replies.size(), 1u);
    return replies.empty() ? v1::OperatorResponse{} : replies.back().operator_response();
  };
  ApplyOk(Queues("  admissionChecks: [budget]"));
  ApplyOk(Job("first"));
  controller_->Schedule(kT0);

  v1::OperatorResponse r = send("bob");  // a user of the job's namespace, not an admin
  EXPECT_EQ(r.error_code(), "PermissionDenied");
  EXPECT_EQ(r.error(),
            "user \"bob\" may not mark admission checks Ready in namespace \"default\" (admins "
            "only)");
  r = send("eve");
  EXPECT_EQ(r.error_code(), "PermissionDenied");
  EXPECT_NE(r.error().find("the access policy does not name the user"), std::string::npos);
  EXPECT_EQ(PhaseName(JobOrDie("first")), "Pending");

  r = send("alice");
  EXPECT_EQ(r.error(), "");
  EXPECT_EQ(r.admit_check().name(), "first");
  EXPECT_TRUE(r.admit_check().changed());
  EXPECT_TRUE(HasEvent(JobOrDie("first"), "AdmissionCheckReady", "marked Ready by alice"));
  EXPECT_EQ(PhaseName(JobOrDie("first")), "Starting");
}

}  // namespace
}  // namespace trainlet::coordinator
