// AdmissionStep (coordinator/admission_step.h) on its own, with a fake owner standing in for
// JobController: queues off places everything and runs no pass; with queues, admitted jobs may
// be placed and the others wait with their reason; a pass runs again only when the owner's
// generation moved, or once a second; admission checks hold an admitted job until AdmitCheck.
#include "coordinator/admission_step.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "coordinator/job_state_machine.h"
#include "tests/coordinator/queue_objects.h"

namespace trainlet::coordinator {
namespace {

constexpr int64_t kT0 = 1'700'000'000'000;

class FakeOwner : public AdmissionStep::Owner {
 public:
  JobEntry* FindJob(const std::string& key) override {
    auto it = jobs.find(key);
    return it == jobs.end() ? nullptr : it->second.get();
  }
  void MarkDirty(JobEntry& job) override {
    job.dirty = true;
    ++gen;
  }
  uint64_t generation() const override { return gen; }
  Result<v1::SuspendJobResult> ResumeAdmitted(const std::string& key, const std::string&,
                                              int64_t) override {
    resumed.push_back(key);
    jobs.at(key)->record.status.set_job_phase(v1::JOB_PHASE_PENDING);
    return v1::SuspendJobResult();
  }
  Result<v1::SuspendJobResult> Preempt(const std::string& key, const std::string&,
                                       int64_t) override {
    preempted.push_back(key);
    return v1::SuspendJobResult();
  }

  std::map<std::string, std::unique_ptr<JobEntry>> jobs;
  std::vector<JobEntry*> order;
  uint64_t gen = 0;
  std::vector<std::string> resumed, preempted;
};

class AdmissionStepTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/trainlet-admission-step-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    auto store = JobStore::Open(root_ + "/state");
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(store).value();
    step_ = std::make_unique<AdmissionStep>(&catalog_, store_.get(), &owner_, JobAdmitterOptions{});
  }
  void TearDown() override {
    step_.reset();
    store_.reset();
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
  }

  // Queue objects: ClusterQueue cq of 1 cpu (with `extra` in its spec), LocalQueue lq.
  void Queues(const std::string& extra = "") {
    CommitQueueObjects(
        catalog_,
        "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\nmetadata: {name: f}\n---\n"
        "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {name: cq}\nspec:\n"
        "  namespaceSelector: {}\n" +
            extra +
            "  resourceGroups:\n  - coveredResources: [cpu]\n    flavors:\n    - name: f\n"
            "      resources:\n      - {name: cpu, nominalQuota: 1}\n---\n"
            "apiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\nmetadata: {name: lq}\n"
            "spec: {clusterQueue: cq}\n");
  }

  // A Pending one-node job in LocalQueue lq asking 1 cpu, created at kT0 + i, and stored.
  JobEntry& AddJob(const std::string& name) {
    auto job = std::make_unique<JobEntry>();
    job->record.name = name;
    job->record.status.set_name(name);
    job->record.status.set_job_phase(v1::JOB_PHASE_PENDING);
    job->record.status.set_num_nodes(1);
    job->record.status.set_created_unix_ms(kT0 + static_cast<int64_t>(owner_.order.size()));
    job->spec.queue_name = "lq";
    job->gang.resources[ResourceKind::kCpu] = 1000;
    job->plugin = FindRuntimePlugin("plain");
    EXPECT_NE(job->plugin, nullptr);
    EXPECT_TRUE(store_->CreateJob(job->record).ok());
    JobEntry& ref = *job;
    owner_.order.push_back(job.get());
    owner_.jobs[name] = std::move(job);
    return ref;
  }

  std::string root_;
  std::unique_ptr<JobStore> store_;
  QueueCatalog catalog_;
  FakeOwner owner_;
  std::unique_ptr<AdmissionStep> step_;
};

TEST_F(AdmissionStepTest, WithoutQueuesEveryJobMayBePlacedAndNoPassRuns) {
  JobEntry& job = AddJob("a");
  step_->Run(owner_.order, kT0);
  EXPECT_TRUE(step_->MayPlace(job.record.status));
  EXPECT_FALSE(job.record.status.has_admission());
  EXPECT_FALSE(job.dirty);
}

TEST_F(AdmissionStepTest, AdmittedJobsMayBePlacedTheOthersWaitWithTheirReason) {
  Queues();
  JobEntry& a = AddJob("a");
  JobEntry& b = AddJob("b");
  step_->Run(owner_.order, kT0);
  ASSERT_TRUE(a.record.status.has_admission());
  EXPECT_EQ(a.record.status.admission().cluster_queue(), "cq");
  EXPECT_TRUE(step_->MayPlace(a.record.status));
  EXPECT_FALSE(step_->MayPlace(b.record.status));
  EXPECT_EQ(b.record.status.queue_wait().kind(), "Quota");
  EXPECT_TRUE(a.dirty);
  EXPECT_EQ(step_->TakeStats().wait_seconds["cq"].size(), 1u);
}

TEST_F(AdmissionStepTest, APassRunsAgainOnlyWhenSomethingChangedOrOnceASecond) {
  Queues();
  JobEntry& a = AddJob("a");
  JobEntry& b = AddJob("b");
  step_->Run(owner_.order, kT0);
  ASSERT_TRUE(a.record.status.has_admission());
  // a ends: its quota goes back, which is a change, so the same Run's pass admits b.
  a.record.status.set_job_phase(v1::JOB_PHASE_SUCCEEDED);
  step_->Run(owner_.order, kT0 + 10);
  EXPECT_FALSE(a.record.status.has_admission());
  EXPECT_TRUE(b.record.status.has_admission());

  // c comes and b goes without the owner's generation moving: no pass until the idle interval.
  JobEntry& c = AddJob("c");
  b.record.status.set_job_phase(v1::JOB_PHASE_SUCCEEDED);
  b.record.status.clear_admission();
  step_->Run(owner_.order, kT0 + 30);
  EXPECT_FALSE(c.record.status.has_admission());
  step_->Run(owner_.order, kT0 + 1100);  // the idle interval passed
  EXPECT_TRUE(c.record.status.has_admission());
}

TEST_F(AdmissionStepTest, AdmissionChecksHoldAnAdmittedJobUntilEachIsReady) {
  Queues("  admissionChecks: [budget]\n");
  JobEntry& a = AddJob("a");
  step_->Run(owner_.order, kT0);
  ASSERT_TRUE(a.record.status.has_admission());
  EXPECT_FALSE(step_->MayPlace(a.record.status));
  EXPECT_EQ(a.record.status.queue_wait().kind(), "AdmissionCheck");
  auto r = step_->AdmitCheck("a", "budget", kT0 + 5, "alice");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->changed());
  EXPECT_TRUE(step_->MayPlace(a.record.status));
  EXPECT_FALSE(a.record.status.has_queue_wait());
  auto stored = store_->GetJob("a");
  ASSERT_TRUE(stored.ok() && stored->has_value());
  EXPECT_EQ((*stored)->status.admission_checks_ready_size(), 1);
}

}  // namespace
}  // namespace trainlet::coordinator
