// Queues in front of placement (coordinator/job_admitter.h, admission_step.h), through a
// real JobController and SQLite store: no queues changes nothing; a queued job waits for quota
// with its reason and is placed once admitted; the admission is stored before any plan goes out;
// a higher-priority job preempts a lower one, which is suspended, warned, and admitted again
// later; a missing priority class is a wait, not a failure; fair sharing's usage history survives
// a restart of the controller.
#include <gtest/gtest.h>

#include <string>

#include "controller_fixture.h"

namespace trainlet::coordinator {
namespace {

constexpr const char* kQueues = R"(
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: default-flavor}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: research}
spec:
  namespaceSelector: {}
  preemption: {withinClusterQueue: LowerPriority}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default-flavor
      resources:
      - {name: cpu, nominalQuota: 1}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {namespace: default, name: lq}
spec: {clusterQueue: research}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: WorkloadPriorityClass
metadata: {name: low}
value: 10
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: WorkloadPriorityClass
metadata: {name: high}
value: 1000
)";

// A one-node job asking `cpu`, in LocalQueue lq (none when `queue` is false).
std::string Job(const std::string& name, const std::string& cpu, const std::string& priority = "",
                bool queue = true) {
  std::string y = "apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata:\n";
  y += "  name: " + name + "\n";
  if (queue) {
    y += "  labels:\n    kueue.x-k8s.io/queue-name: lq\n";
    if (!priority.empty()) y += "    kueue.x-k8s.io/priority-class: " + priority + "\n";
  }
  y += "spec:\n  runtimeRef: {name: plain}\n  trainer:\n    numNodes: 1\n";
  y += "    resourcesPerNode: {requests: {cpu: \"" + cpu + "\"}}\n";
  y += "    command: [\"true\"]\n";
  return y;
}

class JobAdmissionTest : public testing::ControllerFixture {
 protected:
  void SetUp() override {
    testing::ControllerFixture::SetUp();
    // The fixture's nodes have no cpu to give: one that has 8 cpus, so quota, not room, binds.
    v1::NodeInfo info;
    info.set_name("cpu-node");
    info.set_address("127.0.0.9");
    info.set_hostname("cpu-node");
    info.set_slots(8);
    (*info.mutable_allocatable())["cpu"] = 8;
    ASSERT_TRUE(registry_.Register(info, "rid-cpu", "key-cpu", Clock::now(), kT0).ok());
  }
};

TEST_F(JobAdmissionTest, WithoutQueuesNothingChanges) {
  ApplyOk(Job("plain-job", "1", "", false));
  controller_->Schedule(kT0);
  const v1::JobStatus& st = JobOrDie("plain-job");
  EXPECT_EQ(PhaseName(st), "Starting");
  EXPECT_FALSE(st.has_admission());
  EXPECT_FALSE(st.has_queue_wait());
  EXPECT_FALSE(controller_->admitter().active());
}

TEST_F(JobAdmissionTest, AQueuedJobWaitsForQuotaWithItsReasonThenRuns) {
  ApplyOk(kQueues);
  ApplyOk(Job("first", "1"));
  ApplyOk(Job("second", "1"));
  controller_->Schedule(kT0);
  const v1::JobStatus& first = JobOrDie("first");
  ASSERT_TRUE(first.has_admission());
  EXPECT_EQ(first.admission().cluster_queue(), "research");
  ASSERT_EQ(first.admission().resources_size(), 1);
  EXPECT_EQ(first.admission().resources(0).flavor(), "default-flavor");
  EXPECT_EQ(first.admission().resources(0).amount(), 1000);
  EXPECT_EQ(PhaseName(first), "Starting");
  // The admission was stored with the placement, before the plan went out.
  auto stored = Stored("first");
  ASSERT_TRUE(stored.has_value());
  EXPECT_TRUE(stored->status.has_admission());
  EXPECT_EQ(sink_.Plans().size(), 1u);

  const v1::JobStatus& second = JobOrDie("second");
  EXPECT_FALSE(second.has_admission());
  EXPECT_EQ(PhaseName(second), "Pending");
  ASSERT_TRUE(second.has_queue_wait());
  EXPECT_EQ(second.queue_wait().kind(), "Quota");
  EXPECT_NE(second.queue_wait().message().find("cpu"), std::string::npos)
      << second.queue_wait().message();
  EXPECT_NE(second.queue_wait().message().find("research"), std::string::npos);
  EXPECT_TRUE(second.ranks().empty());  // nothing placed while it waits

  ReportAll("first", v1::WorkerEvent::KIND_STARTED, kT0 + 10);
  ReportAll("first", v1::WorkerEvent::KIND_EXITED, kT0 + 20);
  controller_->Schedule(kT0 + 30);  // first is done: its quota goes back
  EXPECT_FALSE(JobOrDie("first").has_admission());
  controller_->Schedule(kT0 + 2000);
  EXPECT_TRUE(JobOrDie("second").has_admission());
  EXPECT_EQ(PhaseName(JobOrDie("second")), "Starting");
}

TEST_F(JobAdmissionTest, AJobThatCanNeverFitSaysSoAtOnce) {
  ApplyOk(kQueues);
  ApplyOk(Job("huge", "4"));
  controller_->Schedule(kT0);
  const v1::JobStatus& st = JobOrDie("huge");
  ASSERT_TRUE(st.has_queue_wait());
  EXPECT_EQ(st.queue_wait().kind(), "NeverFits");
  bool warned = false;
  for (const auto& e : st.events()) warned |= e.reason() == "NeverFits";
  EXPECT_TRUE(warned);
}

TEST_F(JobAdmissionTest, AMissingPriorityClassIsAWait) {
  ApplyOk(kQueues);
  ApplyOk(Job("orphan", "1", "nonexistent"));
  controller_->Schedule(kT0);
  const v1::JobStatus& st = JobOrDie("orphan");
  ASSERT_TRUE(st.has_queue_wait());
  EXPECT_EQ(st.queue_wait().kind(), "NoPriorityClass");
  EXPECT_EQ(PhaseName(st), "Pending");
}

TEST_F(JobAdmissionTest, AHigherPriorityJobPreemptsWarnsAndTheVictimComesBack) {
  ApplyOk(kQueues);
  ApplyOk(Job("low", "1", "low"));
  controller_->Schedule(kT0);
  ReportAll("low", v1::WorkerEvent::KIND_STARTED, kT0 + 10);
  ASSERT_EQ(PhaseName(JobOrDie("low")), "Running");

  ApplyOk(Job("high", "1", "high"), kT0 + 100);
  controller_->Schedule(kT0 + 2000);
  const v1::JobStatus& low = JobOrDie("low");
  EXPECT_EQ(PhaseName(low), "Suspended");
  EXPECT_EQ(low.reason(), "Preempted");
  EXPECT_EQ(low.preemptions(), 1u);
  bool preempted_event = false;
  for (const auto& e : low.events()) {
    preempted_event |= e.message().find("Preempted by default/high (priority 1000)") == 0;
  }
  EXPECT_TRUE(preempted_event);
  auto stops = sink_.Stops();
  ASSERT_FALSE(stops.empty());
  EXPECT_NE(stops.back().second.warning_signal(), 0);  // SIGUSR1 first, then the grace
  // The victim holds its quota until its ranks are gone: high waits, placed nowhere.
  EXPECT_FALSE(JobOrDie("high").has_admission());
  EXPECT_EQ(JobOrDie("high").queue_wait().kind(), "Preempting");

  ReportAll("low", v1::WorkerEvent::KIND_EXITED, kT0 + 3000);
  controller_->Schedule(kT0 + 4000);
  EXPECT_TRUE(JobOrDie("high").has_admission());
  EXPECT_EQ(PhaseName(JobOrDie("high")), "Starting");
  EXPECT_FALSE(JobOrDie("low").has_admission());

  ReportAll("high", v1::WorkerEvent::KIND_STARTED, kT0 + 5000);
  ReportAll("high", v1::WorkerEvent::KIND_EXITED, kT0 + 6000);
  controller_->Schedule(kT0 + 7000);
  controller_->Schedule(kT0 + 9000);
  const v1::JobStatus& back = JobOrDie("low");
  EXPECT_TRUE(back.has_admission());
  EXPECT_EQ(PhaseName(back), "Starting");
  EXPECT_EQ(back.attempt(), 2u);
  // The new attempt's ranks are told they were preempted.
  bool hinted = false;
  for (const auto& [node, plan] : sink_.Plans()) {
    if (plan.job() != "low" || plan.attempt() != 2) continue;
    for (const auto& w : plan.workers()) {
      for (const auto& [k, v] : w.env()) hinted |= k == "TRAINLET_PREEMPTED" && v == "1";
    }
  }
  EXPECT_TRUE(hinted);
}

}  // namespace
}  // namespace trainlet::coordinator

namespace trainlet::coordinator {
namespace {

// A job already being stopped with a warning (here preempted) whose node is then lost: its ranks
// may live on there through the warning grace and the stop grace, so its next attempt waits for
// both (before, the hold was applied only to Starting and Running jobs).
TEST_F(JobAdmissionTest, ALostNodeHoldsAStoppingJobThroughItsWarningGrace) {
  ApplyOk(Job("warned", "1", "", false));
  controller_->Schedule(kT0);
  ReportAll("warned", v1::WorkerEvent::KIND_STARTED, kT0 + 10);
  ASSERT_TRUE(controller_->Preempt("warned", "a test", kT0 + 20).ok());
  const std::string node = JobOrDie("warned").ranks(0).node();
  const int64_t hold = kT0 + 1000;  // partition grace + stop grace, as the coordinator computes
  controller_->OnNodeLost(node, kT0 + 30, hold);
  ASSERT_TRUE(controller_->SetSuspend("warned", false, kT0 + 40).ok());
  const int64_t grace_ms = kDefaultPreemptionGraceSeconds * 1000;
  controller_->Schedule(hold + grace_ms - 1);
  EXPECT_EQ(JobOrDie("warned").attempt(), 1u) << "placed while the old ranks may be in their grace";
  controller_->Schedule(hold + grace_ms + 1);
  EXPECT_EQ(JobOrDie("warned").attempt(), 2u);
}

// `memory: 4Ei` (2^62 bytes, the largest quantity) in two ClusterQueues of one cohort: their sum
// overflowed the cohort's quota, and then a job asking 1 GiB "could never fit".
TEST_F(JobAdmissionTest, HugeQuotasInACohortStillAdmit) {
  std::string queues;
  for (const char* name : {"huge-a", "huge-b"}) {
    queues +=
        std::string("apiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {name: ") +
        name +
        "}\nspec:\n  cohort: all\n  namespaceSelector: {}\n  resourceGroups:\n"
        "  - coveredResources: [memory]\n    flavors:\n    - name: default-flavor\n"
        "      resources:\n      - {name: memory, nominalQuota: 4Ei}\n---\n";
  }
  queues +=
      "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\nmetadata: {name: default-flavor}\n"
      "---\napiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\n"
      "metadata: {namespace: default, name: lq}\nspec: {clusterQueue: huge-a}\n";
  ApplyOk(queues);
  std::string job = Job("big", "1");
  job.replace(job.find("cpu: \"1\""), 8, "memory: \"1Gi\"");
  ApplyOk(job);
  controller_->Schedule(kT0);
  const v1::JobStatus& st = JobOrDie("big");
  EXPECT_TRUE(st.has_admission()) << st.queue_wait().kind() << ": " << st.queue_wait().message();
}

// A victim is preempted once. While its ranks are in their warning grace it is Suspended and
// still holds its quota; the next pass, still short of that quota, used to pick it again and,
// finding it no longer Running, take it for one admitted but not placed: its quota went back at
// once and the preemptor was admitted beside ranks that still ran (over quota for the grace).
TEST_F(JobAdmissionTest, AVictimInItsGraceIsNotPreemptedAgainAndKeepsItsQuota) {
  ApplyOk(kQueues);
  ApplyOk(Job("low", "1", "low"));
  controller_->Schedule(kT0);
  ReportAll("low", v1::WorkerEvent::KIND_STARTED, kT0 + 10);
  ApplyOk(Job("high", "1", "high"), kT0 + 100);
  for (const int64_t now : {kT0 + 2000, kT0 + 4000, kT0 + 6000}) {
    controller_->Schedule(now);
    EXPECT_TRUE(JobOrDie("low").has_admission()) << "quota let go at " << now - kT0;
    EXPECT_FALSE(JobOrDie("high").has_admission()) << "admitted at " << now - kT0;
    EXPECT_EQ(JobOrDie("high").queue_wait().kind(), "Preempting");
  }
  auto count = [this](const std::string& job, const std::string& reason) {
    int n = 0;
    for (const auto& e : JobOrDie(job).events()) n += e.reason() == reason;
    return n;
  };
  EXPECT_EQ(count("low", "Preempted"), 1);
  EXPECT_EQ(count("high", "Preempting"), 1);
  EXPECT_EQ(controller_->TakeAdmissionStats().preemptions["research"], 1u);  // the metric

  ReportAll("low", v1::WorkerEvent::KIND_EXITED, kT0 + 7000);
  controller_->Schedule(kT0 + 7100);
  controller_->Schedule(kT0 + 7200);
  EXPECT_FALSE(JobOrDie("low").has_admission());
  EXPECT_TRUE(JobOrDie("high").has_admission());
}

// The same with queues: a preempted job's ranks on a node that went silent (a hung agent, which
// never got the stop) may run on there through the partition, warning and stop graces, so its
// quota is held as long as its next attempt is: the preemptor waits (Preempting) and is not
// admitted into quota those ranks may still use. Before, a Lost rank counted as stopped and the
// quota went back at once, so both jobs ran in a queue with room for one.
TEST_F(JobAdmissionTest, APreemptedJobOnALostNodeHoldsItsQuotaThroughTheHold) {
  ApplyOk(kQueues);
  ApplyOk(Job("low", "1", "low"));
  controller_->Schedule(kT0);
  ReportAll("low", v1::WorkerEvent::KIND_STARTED, kT0 + 10);
  ApplyOk(Job("high", "1", "high"), kT0 + 100);
  controller_->Schedule(kT0 + 2000);
  ASSERT_EQ(JobOrDie("low").reason(), "Preempted");
  ASSERT_EQ(JobOrDie("high").queue_wait().kind(), "Preempting");

  const int64_t hold = kT0 + 5000;  // last heard + partition grace + stop grace + margin
  controller_->OnNodeLost(JobOrDie("low").ranks(0).node(), kT0 + 2100, hold);
  const int64_t until = hold + kDefaultPreemptionGraceSeconds * 1000;
  for (const int64_t now : {kT0 + 2200, hold + 1, until - 1}) {
    controller_->Schedule(now);
    EXPECT_TRUE(JobOrDie("low").has_admission()) << "quota let go at " << now - kT0;
    EXPECT_FALSE(JobOrDie("high").has_admission()) << "admitted at " << now - kT0;
    EXPECT_EQ(JobOrDie("high").queue_wait().kind(), "Preempting");
  }
  controller_->Schedule(until + 1);
  controller_->Schedule(until + 2);
  EXPECT_FALSE(JobOrDie("low").has_admission());
  EXPECT_TRUE(JobOrDie("high").has_admission());
}

}  // namespace
}  // namespace trainlet::coordinator

namespace trainlet::coordinator {
namespace {

// Queue objects change under admitted jobs: a ClusterQueue's quota shrinks below what is in use,
// its priority class or the ClusterQueue itself is deleted. Nothing crashes, nothing admitted
// is dropped from the count, and nothing new is admitted over the smaller quota.
TEST_F(JobAdmissionTest, QueueObjectsChangingUnderAdmittedJobs) {
  ApplyOk(kQueues);
  ApplyOk(Job("running", "1", "low"));
  controller_->Schedule(kT0);
  ReportAll("running", v1::WorkerEvent::KIND_STARTED, kT0 + 10);
  ASSERT_TRUE(JobOrDie("running").has_admission());
  // The quota shrinks to 500m while 1 cpu is in use.
  std::string smaller = kQueues;
  const std::string from = "{name: cpu, nominalQuota: 1}";
  smaller.replace(smaller.find(from), from.size(), "{name: cpu, nominalQuota: 500m}");
  ApplyOk(smaller, kT0 + 20);
  ApplyOk(Job("small", "250m"), kT0 + 30);
  controller_->Schedule(kT0 + 2000);
  EXPECT_FALSE(JobOrDie("small").has_admission()) << "admitted over a quota already used up";
  // Its priority class is deleted: it still holds its quota.
  ASSERT_TRUE(controller_->queues()
                  .Delete(kueue::Kind::kWorkloadPriorityClass, "", "low", controller_->store())
                  .ok());
  controller_->Schedule(kT0 + 4000);
  EXPECT_TRUE(JobOrDie("running").has_admission());
  EXPECT_FALSE(JobOrDie("small").has_admission());
  // The ClusterQueue is deleted: the waiting job says so, the coordinator carries on.
  ASSERT_TRUE(controller_->queues()
                  .Delete(kueue::Kind::kClusterQueue, "", "research", controller_->store())
                  .ok());
  controller_->Schedule(kT0 + 6000);
  ASSERT_TRUE(JobOrDie("small").has_queue_wait());
  EXPECT_EQ(JobOrDie("small").queue_wait().kind(), "NoClusterQueue");
}

// Two ClusterQueues of one cohort, 1 cpu each: a 2-cpu job of either must borrow the other's.
constexpr const char* kCohortQueues = R"(
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: default-flavor}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: team-a}
spec:
  namespaceSelector: {}
  cohort: lab
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default-flavor
      resources:
      - {name: cpu, nominalQuota: 1}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: team-b}
spec:
  namespaceSelector: {}
  cohort: lab
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default-flavor
      resources:
      - {name: cpu, nominalQuota: 1}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {namespace: default, name: qa}
spec: {clusterQueue: team-a}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {namespace: default, name: qb}
spec: {clusterQueue: team-b}
)";

std::string InQueue(std::string job, const std::string& queue) {
  const std::string from = "queue-name: lq";
  return job.replace(job.find(from), from.size(), "queue-name: " + queue);
}

TEST_F(JobAdmissionTest, FairSharingRemembersWhoUsedTheCohortAcrossARestart) {
  ApplyOk(kCohortQueues);
  ApplyOk(InQueue(Job("a-first", "2"), "qa"));
  controller_->Schedule(kT0);
  ASSERT_TRUE(JobOrDie("a-first").has_admission());
  ReportAll("a-first", v1::WorkerEvent::KIND_STARTED, kT0 + 10);
  // team-a holds the whole cohort for five minutes, then its job ends.
  for (int minute = 1; minute <= 5; ++minute) controller_->Schedule(kT0 + minute * 60'000);
  ReportAll("a-first", v1::WorkerEvent::KIND_EXITED, kT0 + 300'010);
  controller_->Schedule(kT0 + 320'000);
  ASSERT_FALSE(JobOrDie("a-first").has_admission());

  // The coordinator restarts. Then team-a and team-b queue a job each for the whole cohort, in one
  // file (one pass sees both), team-a's first: team-b used less recently, so it goes first. With
  // the history forgotten, the two would tie and team-a's job, first in the file, would win.
  MakeController();
  ApplyOk(InQueue(Job("a-second", "2"), "qa") + "---\n" + InQueue(Job("b-first", "2"), "qb"),
          kT0 + 330'000);
  EXPECT_TRUE(JobOrDie("b-first").has_admission());
  EXPECT_FALSE(JobOrDie("a-second").has_admission());
}

}  // namespace
}  // namespace trainlet::coordinator
