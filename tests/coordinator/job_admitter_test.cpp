// JobAdmitter (coordinator/job_admitter.h) keeps the engine's inputs between passes and fills
// them again in place. Nothing of an earlier pass may leak into a later one: a workload filled
// over another job's is that job's alone, and a long-lived admitter decides every pass exactly
// as a fresh one given the same jobs and usage history.
#include "coordinator/job_admitter.h"

#include <gtest/gtest.h>
#include <malloc.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "coordinator/job_state_machine.h"
#include "tests/coordinator/queue_objects.h"

namespace trainlet::coordinator {
namespace {

constexpr int64_t kT0 = 1'700'000'000'000;

// Every field of the engine's workload, so two can be compared whole.
std::string Describe(const admission::Workload& w) {
  std::string out = w.key + "|" + w.namespace_ + "|" + w.local_queue + "|" +
                    std::to_string(w.priority) + "|" + std::to_string(w.creation_ms) + "|" +
                    std::to_string(w.pod_count) + "|" + std::to_string(w.admitted_ms) + "|";
  for (const auto& [r, n] : w.per_pod) out += r + "=" + std::to_string(n) + ",";
  out += "|";
  for (const auto& [k, v] : w.node_selector) out += k + "=" + v + ",";
  out += "|";
  for (const auto& t : w.tolerations)
    out += t.key + ":" + t.op + ":" + t.value + ":" + t.effect + ",";
  out += "|";
  if (w.admission) {
    out += w.admission->cluster_queue + (w.admission->borrowing ? " borrowing" : "") +
           (w.admission->unmanaged ? " unmanaged" : "");
    for (const auto& a : w.admission->resources)
      out += " " + a.resource + "/" + a.flavor + "=" + std::to_string(a.amount);
  } else {
    out += "no admission";
  }
  return out;
}

class JobAdmitterTest : public ::testing::Test {
 protected:
  // ResourceFlavor f; ClusterQueues a (4 cpu, 2 GPUs) and b (2 cpu) in one cohort with
  // LocalQueues lq-a and lq-b; WorkloadPriorityClass high (100).
  void SetUp() override {
    Apply(
        "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\nmetadata: {name: f}\n---\n"
        "apiVersion: kueue.x-k8s.io/v1beta1\nkind: WorkloadPriorityClass\nmetadata: {name: high}\n"
        "value: 100\n---\n"
        "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {name: a}\nspec:\n"
        "  cohort: c\n  namespaceSelector: {}\n  preemption: {withinClusterQueue: LowerPriority}\n"
        "  resourceGroups:\n  - coveredResources: [cpu, nvidia.com/gpu]\n    flavors:\n"
        "    - name: f\n      resources:\n      - {name: cpu, nominalQuota: 4}\n"
        "      - {name: nvidia.com/gpu, nominalQuota: 2}\n---\n"
        "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {name: b}\nspec:\n"
        "  cohort: c\n  namespaceSelector: {}\n  resourceGroups:\n  - coveredResources: [cpu]\n"
        "    flavors:\n    - name: f\n      resources:\n      - {name: cpu, nominalQuota: 2}\n---\n"
        "apiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\nmetadata: {name: lq-a}\n"
        "spec: {clusterQueue: a}\n---\n"
        "apiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\nmetadata: {name: lq-b}\n"
        "spec: {clusterQueue: b}\n");
  }

  void Apply(const std::string& yaml) { CommitQueueObjects(catalog_, yaml); }

  // A Pending job of `nodes` nodes asking `cpu` cores (and `gpus`) per node in `queue`.
  JobEntry& AddJob(const std::string& name, const std::string& queue, int64_t cpu, int64_t gpus = 0,
                   uint32_t nodes = 1) {
    auto job = std::make_unique<JobEntry>();
    job->record.name = name;
    job->record.status.set_name(name);
    job->record.status.set_job_phase(v1::JOB_PHASE_PENDING);
    job->record.status.set_num_nodes(nodes);
    job->record.status.set_created_unix_ms(kT0 + static_cast<int64_t>(jobs_.size() / 3));
    job->spec.queue_name = queue;
    job->gang.resources[ResourceKind::kCpu] = cpu * 1000;
    job->gang.resources[ResourceKind::kNvidiaGpu] = gpus;
    job->plugin = FindRuntimePlugin("plain");
    EXPECT_NE(job->plugin, nullptr);
    jobs_.push_back(std::move(job));
    return *jobs_.back();
  }

  std::vector<const JobEntry*> Order() const {
    std::vector<const JobEntry*> out;
    for (const auto& j : jobs_) out.push_back(j.get());
    return out;
  }

  QueueCatalog catalog_;
  std::vector<std::unique_ptr<JobEntry>> jobs_;
};

TEST_F(JobAdmitterTest, AWorkloadFilledOverAnotherJobsIsThatJobsAlone) {
  JobEntry& rich = AddJob("rich", "lq-a", 2, 1, 2);
  rich.record.status.set_namespace_("team");
  rich.spec.priority_class = "high";
  rich.gang.node_selector = {{"zone", "z1"}, {"rack", "r2"}};
  rich.gang.tolerations = {{"gpu", "Exists", "", "NoSchedule"}, {"k", "Equal", "v", ""}};
  auto* adm = rich.record.status.mutable_admission();
  adm->set_cluster_queue("a");
  adm->set_borrowing(true);
  adm->set_unix_ms(kT0 + 5);
  for (auto [r, n] : {std::pair{"cpu", 4000}, std::pair{"nvidia.com/gpu", 2}}) {
    auto* res = adm->add_resources();
    res->set_resource(r);
    res->set_flavor("f");
    res->set_amount(n);
  }
  JobEntry& plain = AddJob("plain-job-with-a-long-name", "", 1);

  for (auto [first, second] : {std::pair{&rich, &plain}, std::pair{&plain, &rich}}) {
    admission::Workload reused, fresh;
    ASSERT_FALSE(FillWorkload(*first, catalog_, reused));
    ASSERT_FALSE(FillWorkload(*second, catalog_, reused));
    ASSERT_FALSE(FillWorkload(*second, catalog_, fresh));
    EXPECT_EQ(Describe(reused), Describe(fresh));
  }
  admission::Workload w;
  ASSERT_FALSE(FillWorkload(rich, catalog_, w));
  EXPECT_EQ(Describe(w),
            "rich|team|lq-a|100|1700000000000|2|1700000000005|cpu=2000,nvidia.com/gpu=1,|"
            "rack=r2,zone=z1,|gpu:Exists::NoSchedule,k:Equal:v:,|a borrowing cpu/f=4000 "
            "nvidia.com/gpu/f=2");

  // A missing priority class is a wait, and leaves the workload as it was.
  plain.spec.priority_class = "gone";
  const std::string before = Describe(w);
  auto wait = FillWorkload(plain, catalog_, w);
  ASSERT_TRUE(wait);
  EXPECT_EQ(wait->key, "plain-job-with-a-long-name");
  EXPECT_EQ(wait->message, "WorkloadPriorityClass gone not found");
  EXPECT_EQ(Describe(w), before);
}

// Passes over changing jobs (new ones, admissions carried out, jobs ending or deleted, requests,
// queues and priority classes changed between passes): each decides as a fresh JobAdmitter does.
TEST_F(JobAdmitterTest, EveryPassDecidesAsAFreshAdmitter) {
  std::mt19937 rng(7);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  JobAdmitter kept(&catalog_, JobAdmitterOptions{});
  int made = 0;
  auto add = [&]() {
    const char* queues[] = {"lq-a", "lq-b", "", "missing"};
    JobEntry& j =
        AddJob("job-" + std::to_string(made++) + std::string(pick(0, 20), 'x'), queues[pick(0, 3)],
               pick(0, 3), pick(0, 2) == 0 ? pick(1, 2) : 0, static_cast<uint32_t>(pick(1, 2)));
    if (pick(0, 4) == 0) j.spec.priority_class = pick(0, 1) ? "high" : "gone";
    if (pick(0, 4) == 0) j.gang.node_selector = {{"zone", pick(0, 1) ? "z1" : "z2"}};
    if (pick(0, 4) == 0) j.gang.tolerations = {{"gpu", "Exists", "", "NoSchedule"}};
  };
  for (int i = 0; i < 12; ++i) add();
  int passes_with_admissions = 0, passes_with_waits = 0;
  for (int pass = 0; pass < 60; ++pass) {
    const int64_t now = kT0 + 1000 * pass;
    JobAdmitter fresh(&catalog_, JobAdmitterOptions{});
    fresh.RestoreHistory(kept.history());
    const AdmissionDecisions& a = kept.Pass(Order(), now);
    const AdmissionDecisions& b = fresh.Pass(Order(), now);
    auto describe = [](const AdmissionDecisions& d) {
      std::string out;
      for (const auto& [key, adm] : d.result.admitted) {
        out += "admit " + key + " " + adm.cluster_queue;
        for (const auto& r : adm.resources)
          out += " " + r.resource + "/" + r.flavor + "=" + std::to_string(r.amount);
        out += "\n";
      }
      for (const auto& p : d.result.preemptions)
        out += "preempt " + p.victim + " " + p.message + "\n";
      for (const auto& p : d.result.pending)
        out += "wait " + p.key + " " + p.cluster_queue + " " + std::to_string(p.position) + " " +
               p.message + "\n";
      for (const auto& p : d.unresolved) out += "unresolved " + p.key + " " + p.message + "\n";
      for (size_t i : d.job_of_workload) out += std::to_string(i) + ",";
      return out;
    };
    ASSERT_EQ(describe(a), describe(b)) << "pass " << pass;
    ASSERT_EQ(kept.usage().size(), fresh.usage().size());
    for (size_t i = 0; i < kept.usage().size(); ++i) {
      EXPECT_EQ(kept.usage()[i].admitted, fresh.usage()[i].admitted) << "pass " << pass;
      EXPECT_EQ(kept.usage()[i].pending, fresh.usage()[i].pending) << "pass " << pass;
    }
    passes_with_admissions += !a.result.admitted.empty();
    passes_with_waits += !a.result.pending.empty();

    // Carry the decisions out, as AdmissionStep would, then change the jobs.
    for (const auto& [key, adm] : a.result.admitted) {
      for (auto& j : jobs_) {
        if (j->record.name != key) continue;
        auto* s = j->record.status.mutable_admission();
        s->set_cluster_queue(adm.cluster_queue);
        s->set_unmanaged(adm.unmanaged);
        s->set_borrowing(adm.borrowing);
        s->set_unix_ms(now);
        for (const auto& r : adm.resources) {
          auto* res = s->add_resources();
          res->set_resource(r.resource);
          res->set_flavor(r.flavor);
          res->set_amount(r.amount);
        }
      }
    }
    for (auto& j : jobs_) {
      if (j->record.status.has_admission() && pick(0, 3) == 0) {  // ends: its quota goes back
        j->record.status.set_job_phase(v1::JOB_PHASE_SUCCEEDED);
        j->record.status.clear_admission();
      } else if (pick(0, 9) == 0) {  // changed by a re-apply
        j->gang.resources[ResourceKind::kCpu] = pick(0, 2) * 1000;
        j->spec.queue_name = pick(0, 1) ? "lq-a" : "lq-b";
        j->spec.priority_class = pick(0, 2) == 0 ? "high" : "";
      }
    }
    if (pick(0, 2) == 0 && !jobs_.empty()) jobs_.erase(jobs_.begin() + pick(0, jobs_.size() - 1));
    for (int n = pick(0, 4); n > 0; --n) add();
  }
  // The scenario did what it is for.
  EXPECT_GT(passes_with_admissions, 20);
  EXPECT_GT(passes_with_waits, 20);
}

// A pass over thousands of jobs grows the kept workloads many times over; nothing may point into
// them across a growth. Freed memory is filled with 0xa5 here, so a read of a moved workload sees
// garbage (or, once the block went back to the system, faults) instead of its old bytes.
TEST_F(JobAdmitterTest, APassOverThousandsOfJobsReadsNoMovedWorkload) {
  mallopt(M_PERTURB, 0xa5);
  for (int i = 0; i < 3000; ++i) {
    JobEntry& j = AddJob("bulk-" + std::to_string(i), i % 2 ? "lq-a" : "lq-b", 1);
    if (i >= 1500) j.record.status.set_namespace_("team-" + std::to_string(i / 1000));
  }
  JobAdmitter admitter(&catalog_, JobAdmitterOptions{});
  const AdmissionDecisions& d = admitter.Pass(Order(), kT0);
  mallopt(M_PERTURB, 0);
  // 4 cpu in a and 2 in b: 6 admitted. The other 1,494 of namespace default wait for quota; the
  // 1,500 of the team namespaces, which have no LocalQueue lq-a or lq-b, wait for one.
  EXPECT_EQ(d.result.admitted.size(), 6u);
  ASSERT_EQ(d.result.pending.size(), 2994u);
  int no_local_queue = 0;
  for (const auto& p : d.result.pending)
    no_local_queue += p.kind == admission::WaitKind::kNoLocalQueue;
  EXPECT_EQ(no_local_queue, 1500);
  ASSERT_EQ(admitter.usage().size(), 2u);
  EXPECT_EQ(admitter.usage()[0].pending + admitter.usage()[1].pending, 1494);
}

// PendingChecks looks no further while no ClusterQueue has admission checks; a ClusterQueue
// given some later is seen at once.
TEST_F(JobAdmitterTest, AdmissionChecksAddedToAClusterQueueAreSeenAtOnce) {
  JobAdmitter admitter(&catalog_, JobAdmitterOptions{});
  v1::JobStatus st;
  st.mutable_admission()->set_cluster_queue("b");
  EXPECT_TRUE(admitter.PendingChecks(st).empty());
  Apply(
      "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {name: b}\nspec:\n"
      "  cohort: c\n  namespaceSelector: {}\n  admissionChecks: [budget]\n"
      "  resourceGroups:\n  - coveredResources: [cpu]\n"
      "    flavors:\n    - name: f\n      resources:\n      - {name: cpu, nominalQuota: 2}\n");
  EXPECT_EQ(admitter.PendingChecks(st), std::vector<std::string>{"budget"});
  st.add_admission_checks_ready("budget");
  EXPECT_TRUE(admitter.PendingChecks(st).empty());
}

}  // namespace
}  // namespace trainlet::coordinator
