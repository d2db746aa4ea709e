// RunAdmissionPass: each of Kueue's rules on its own.
#include "coordinator/queue_admission.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/coordinator/admission_fixture.h"

namespace trainlet::coordinator::admission {
namespace {

using namespace fixture;  // NOLINT: the builders of admission_fixture.h
using ::testing::ElementsAre;
using ::testing::UnorderedElementsAre;

TEST(QueueAdmission, AdmitsAWholeGangThatFitsAndNotOneThatDoesNot) {
  AdmissionInputs in = WithDefaultFlavor();
  AddQueue(in, GpuQueue("team-a", 8));
  in.workloads.push_back(Job("team-a", "big", 4, /*pods=*/2, 0, 1));
  in.workloads.push_back(Job("team-a", "one", 1, 1, 0, 2));
  const AdmissionResult r = RunAdmissionPass(in, 0);
  const Admission* big = FindAdmitted(r, "team-a.big");
  ASSERT_NE(big, nullptr);
  EXPECT_EQ(big->cluster_queue, "team-a");
  ASSERT_EQ(big->resources.size(), 1u);
  EXPECT_EQ(big->resources[0].amount, 8);
  EXPECT_EQ(big->resources[0].flavor, "default");
  EXPECT_FALSE(big->borrowing);
  const PendingWorkload* one = FindPending(r, "team-a.one");
  ASSERT_NE(one, nullptr);
  EXPECT_EQ(one->kind, WaitKind::kQuota);
  EXPECT_EQ(one->message, "waiting for 1 nvidia.com/gpu in ClusterQueue team-a, 0 free");
  EXPECT_EQ(one->position, 0);
}

TEST(QueueAdmission, CountsAlreadyAdmittedUsage) {
  AdmissionInputs in = WithDefaultFlavor();
  AddQueue(in, GpuQueue("team-a", 8));
  in.workloads.push_back(Running(Job("team-a", "old", 6)));
  in.workloads.push_back(Job("team-a", "new", 3));
  const AdmissionResult r = RunAdmissionPass(in, 0);
  EXPECT_TRUE(r.admitted.empty());
  EXPECT_EQ(FindPending(r, "team-a.new")->message,
            "waiting for 3 nvidia.com/gpu in ClusterQueue team-a, 2 free");
}

TEST(QueueAdmission, BorrowsFromTheCohortUpToTheBorrowingLimit) {
  AdmissionInputs in = WithDefaultFlavor();
  AddQueue(in, GpuQueue("team-a", 4, "research", /*borrowing_limit=*/4));
  AddQueue(in, GpuQueue("team-b", 8, "research"));
  in.workloads.push_back(Job("team-a", "eight", 8, 1, 0, 1));
  in.workloads.push_back(Job("team-a", "twelve", 12, 1, 0, 2));
  in.workloads.push_back(Job("team-a", "one", 1, 1, 0, 3));
  const AdmissionResult r = RunAdmissionPass(in, 0);
  const Admission* eight = FindAdmitted(r, "team-a.eight");
  ASSERT_NE(eight, nullptr);
  EXPECT_TRUE(eight->borrowing);
  EXPECT_EQ(FindPending(r, "team-a.twelve")->message,
            "can never fit: needs 12 nvidia.com/gpu, ClusterQueue team-a can reach at most 8 "
            "with borrowing");
  // Team-b still has 4 free, but team-a reached its borrowing limit.
  EXPECT_EQ(FindPending(r, "team-a.one")->message,
            "waiting for 1 nvidia.com/gpu in ClusterQueue team-a, 0 free");
}

TEST(QueueAdmission, LendsOnlyUpToTheLendingLimit) {
  AdmissionInputs in = WithDefaultFlavor();
  AddQueue(in, GpuQueue("team-a", 0, "research"));
  AddQueue(in, GpuQueue("team-b", 8, "research", std::nullopt, /*lending_limit=*/2));
  in.workloads.push_back(Job("team-a", "three", 3, 1, 0, 1));
  in.workloads.push_back(Job("team-a", "two", 2, 1, 0, 2));
  in.workloads.push_back(Job("team-b", "six", 6, 1, 0, 3));
  const AdmissionResult r = RunAdmissionPass(in, 0);
  EXPECT_EQ(FindPending(r, "team-a.three")->kind, WaitKind::kNeverFits);
  EXPECT_NE(FindAdmitted(r, "team-a.two"), nullptr);
  // Team-b keeps its 6 guaranteed even though it lent 2.
  EXPECT_NE(FindAdmitted(r, "team-b.six"), nullptr);
  EXPECT_TRUE(UsageWithinQuota(ApplyAdmissionResult(in, r, 1, false)).ok());
}

TEST(QueueAdmission, StrictFifoHeadBlocksSmallerWorkloadsBehindIt) {
  AdmissionInputs in = WithDefaultFlavor();
  ClusterQueue q = GpuQueue("team-a", 4);
  q.strategy = QueueingStrategy::kStrictFifo;
  AddQueue(in, q);
  in.workloads.push_back(Running(Job("team-a", "running", 2)));
  in.workloads.push_back(Job("team-a", "head", 4, 1, 0, 1));
  in.workloads.push_back(Job("team-a", "small", 1, 1, 0, 2));
  in.workloads.push_back(Job("team-a", "huge", 64, 1, 0, 3));
  const AdmissionResult r = RunAdmissionPass(in, 0);
  EXPECT_TRUE(r.admitted.empty());
  EXPECT_EQ(FindPending(r, "team-a.head")->kind, WaitKind::kQuota);
  const PendingWorkload* small = FindPending(r, "team-a.small");
  EXPECT_EQ(small->kind, WaitKind::kBlocked);
  EXPECT_EQ(small->message, "waiting behind team-a/head (StrictFIFO ClusterQueue team-a)");
  EXPECT_EQ(small->position, 1);
  // One that can never fit says so at once, even behind a blocked head.
  EXPECT_EQ(FindPending(r, "team-a.huge")->kind, WaitKind::kNeverFits);
}

TEST(QueueAdmission, StrictFifoIsNotBlockedByOneThatCanNeverFit) {
  AdmissionInputs in = WithDefaultFlavor();
  ClusterQueue q = GpuQueue("team-a", 4);
  q.strategy = QueueingStrategy::kStrictFifo;
  AddQueue(in, q);
  in.workloads.push_back(Job("team-a", "huge", 64, 1, 0, 1));
  in.workloads.push_back(Job("team-a", "small", 1, 1, 0, 2));
  const AdmissionResult r = RunAdmissionPass(in, 0);
  EXPECT_EQ(FindPending(r, "team-a.huge")->message,
            "can never fit: needs 64 nvidia.com/gpu, ClusterQueue team-a has at most 4");
  EXPECT_NE(FindAdmitted(r, "team-a.small"), nullptr);
}

TEST(QueueAdmission, BestEffortFifoLetsASmallerOneThatFitsGo) {
  AdmissionInputs in = WithDefaultFlavor();
  AddQueue(in, GpuQueue("team-a", 4));
  in.workloads.push_back(Running(Job("team-a", "running", 2)));
  in.workloads.push_back(Job("team-a", "head", 4, 1, 0, 1));
  in.workloads.push_back(Job("team-a", "small", 1, 1, 0, 2));
  const AdmissionResult r = RunAdmissionPass(in, 0);
  EXPECT_EQ(FindPending(r, "team-a.head")->kind, WaitKind::kQuota);
  EXPECT_NE(FindAdmitted(r, "team-a.small"), nullptr);
}

TEST(QueueAdmission, HigherPriorityGoesFirstThenOlder) {
  AdmissionInputs in = WithDefaultFlavor();
  AddQueue(in, GpuQueue("team-a", 2));
  in.workloads.push_back(Job("team-a", "low-old", 1, 1, /*priority=*/0, /*created=*/1));
  in.workloads.push_back(Job("team-a", "high-new", 1, 1, 100, 5));
  in.workloads.push_back(Job("team-a", "low-newer", 1, 1, 0, 2));
  const AdmissionResult r = RunAdmissionPass(in, 0);
  ASSERT_EQ(r.admitted.size(), 2u);
  EXPECT_EQ(r.admitted[0].first, "team-a.high-new");
  EXPECT_EQ(r.admitted[1].first, "team-a.low-old");
  EXPECT_EQ(FindPending(r, "team-a.low-newer")->position, 0);
}

AdmissionInputs FullQueueWith(WithinClusterQueuePolicy policy) {
  AdmissionInputs in = WithDefaultFlavor();
  ClusterQueue q = GpuQueue("team-a", 8);
  q.preemption.within_cluster_queue = policy;
  AddQueue(in, q);
  in.workloads.push_back(Running(Job("team-a", "old-big", 4, 1, 0, 1), /*admitted=*/10));
  in.workloads.push_back(Running(Job("team-a", "new-small", 1, 1, 0, 2), 20));
  in.workloads.push_back(Running(Job("team-a", "important", 3, 1, 50, 3), 30));
  return in;
}

TEST(QueueAdmission, PreemptsTheMinimalSetOfLowerPriorityWorkloads) {
  AdmissionInputs in = FullQueueWith(WithinClusterQueuePolicy::kLowerPriority);
  in.workloads.push_back(Job("team-a", "llm-7", 4, 1, 1000, 40));
  in.workloads.push_back(Job("team-a", "filler", 1, 1, 0, 50));
  const AdmissionResult r = RunAdmissionPass(in, 0);
  // Newest first: new-small (1) is not enough, old-big (4) is, and new-small goes back.
  ASSERT_THAT(Victims(r), ElementsAre("team-a.old-big"));
  EXPECT_EQ(r.preemptions[0].preemptor, "team-a.llm-7");
  EXPECT_EQ(r.preemptions[0].rule, PreemptionRule::kInClusterQueue);
  EXPECT_EQ(r.preemptions[0].message, "Preempted by team-a/llm-7 (priority 1000)");
  const PendingWorkload* p = FindPending(r, "team-a.llm-7");
  EXPECT_EQ(p->kind, WaitKind::kPreempting);
  EXPECT_EQ(p->message, "waiting for 1 preempted workload to stop: team-a/old-big");
  // Nothing is admitted before the victims stop, and the room freed is held for the preemptor.
  EXPECT_TRUE(r.admitted.empty());
  AdmissionInputs after = ApplyAdmissionResult(in, r, 100, /*victims_stopped=*/true);
  const AdmissionResult r2 = RunAdmissionPass(after, 100);
  EXPECT_NE(FindAdmitted(r2, "team-a.llm-7"), nullptr);
  EXPECT_EQ(FindAdmitted(r2, "team-a.filler"), nullptr);
  EXPECT_TRUE(r2.preemptions.empty());
}

TEST(QueueAdmission, PreemptsLowestPriorityAndNewestFirst) {
  AdmissionInputs in = FullQueueWith(WithinClusterQueuePolicy::kLowerPriority);
  in.workloads.push_back(Job("team-a", "needs-one", 1, 1, 1000, 40));
  const AdmissionResult r = RunAdmissionPass(in, 0);
  EXPECT_THAT(Victims(r), ElementsAre("team-a.new-small"));
}

TEST(QueueAdmission, NeverPolicyPreemptsNothing) {
  AdmissionInputs in = FullQueueWith(WithinClusterQueuePolicy::kNever);
  in.workloads.push_back(Job("team-a", "llm-7", 4, 1, 1000, 40));
  const AdmissionResult r = RunAdmissionPass(in, 0);
  EXPECT_TRUE(r.preemptions.empty());
  EXPECT_EQ(FindPending(r, "team-a.llm-7")->kind, WaitKind::kQuota);
}

TEST(QueueAdmission, LowerPriorityPolicySparesEqualPriority) {
  AdmissionInputs in = FullQueueWith(WithinClusterQueuePolicy::kLowerPriority);
  in.workloads.push_back(Job("team-a", "peer", 4, 1, 0, 0));
  EXPECT_TRUE(RunAdmissionPass(in, 0).preemptions.empty());
}

TEST(QueueAdmission, LowerOrNewerEqualPriorityPreemptsNewerPeers) {
  AdmissionInputs in = FullQueueWith(WithinClusterQueuePolicy::kLowerOrNewerEqualPriority);
  in.workloads.push_back(Job("team-a", "older-peer", 1, 1, 0, /*created=*/0));
  EXPECT_THAT(Victims(RunAdmissionPass(in, 0)), ElementsAre("team-a.new-small"));
  // A peer created after every running one preempts nobody.
  in.workloads.back() = Job("team-a", "newest-peer", 1, 1, 0, 99);
  EXPECT_TRUE(RunAdmissionPass(in, 0).preemptions.empty());
}

// team-b borrows 4 of team-a's GPUs with two workloads.
AdmissionInputs CohortWithBorrower(ReclaimWithinCohortPolicy reclaim) {
  AdmissionInputs in = WithDefaultFlavor();
  ClusterQueue a = GpuQueue("team-a", 4, "research");
  a.preemption.reclaim_within_cohort = reclaim;
  AddQueue(in, a);
  AddQueue(in, GpuQueue("team-b", 4, "research"));
  in.workloads.push_back(Running(Job("team-b", "b1", 4, 1, 0, 1), 10));
  in.workloads.push_back(Running(Job("team-b", "b2", 4, 1, 0, 2), 20));
  return in;
}

TEST(QueueAdmission, ReclaimsQuotaLentToTheCohort) {
  AdmissionInputs in = CohortWithBorrower(ReclaimWithinCohortPolicy::kLowerPriority);
  in.workloads.push_back(Job("team-a", "mine", 4, 1, 10, 30));
  const AdmissionResult r = RunAdmissionPass(in, 0);
  ASSERT_THAT(Victims(r), ElementsAre("team-b.b2"));
  EXPECT_EQ(r.preemptions[0].rule, PreemptionRule::kInCohortReclamation);
  EXPECT_STREQ(PreemptionRuleName(r.preemptions[0].rule), "InCohortReclamation");
}

TEST(QueueAdmission, ReclaimAnyTakesBackEvenFromHigherPriority) {
  AdmissionInputs in = CohortWithBorrower(ReclaimWithinCohortPolicy::kAny);
  in.workloads.push_back(Job("team-a", "mine", 4, 1, -5, 30));
  EXPECT_THAT(Victims(RunAdmissionPass(in, 0)), ElementsAre("team-b.b2"));
  in.cluster_queues[0].preemption.reclaim_within_cohort = ReclaimWithinCohortPolicy::kLowerPriority;
  EXPECT_TRUE(RunAdmissionPass(in, 0).preemptions.empty());
}

TEST(QueueAdmission, WithoutReclaimTheReasonNamesTheBorrower) {
  AdmissionInputs in = CohortWithBorrower(ReclaimWithinCohortPolicy::kNever);
  in.workloads.push_back(Job("team-a", "mine", 4, 1, 10, 30));
  const AdmissionResult r = RunAdmissionPass(in, 0);
  EXPECT_TRUE(r.preemptions.empty());
  EXPECT_EQ(FindPending(r, "team-a.mine")->message,
            "waiting for 4 nvidia.com/gpu in ClusterQueue team-a, 0 free, 4 borrowed by team-b");
}

// Three queues of 4 GPUs, all in use; team-b borrows 2. Team-a is at nominal and asks 2 more.
AdmissionInputs BorrowWhilePreempting(BorrowWithinCohortPolicy borrow) {
  AdmissionInputs in = WithDefaultFlavor();
  ClusterQueue a = GpuQueue("team-a", 4, "research");
  a.preemption.reclaim_within_cohort = ReclaimWithinCohortPolicy::kLowerPriority;
  a.preemption.borrow_within_cohort = borrow;
  AddQueue(in, a);
  AddQueue(in, GpuQueue("team-b", 4, "research"));
  AddQueue(in, GpuQueue("team-c", 4, "research"));
  in.workloads.push_back(Running(Job("team-a", "a1", 4, 1, 0, 1), 10));
  in.workloads.push_back(Running(Job("team-b", "b1", 4, 1, 0, 2), 20));
  in.workloads.push_back(Running(Job("team-b", "b2", 2, 1, 0, 3), 30));
  in.workloads.push_back(Running(Job("team-c", "c1", 2, 1, 0, 4), 40));
  in.workloads.push_back(Job("team-a", "urgent", 2, 1, 10, 50));
  return in;
}

TEST(QueueAdmission, BorrowWithinCohortPreemptsWhileBorrowing) {
  AdmissionInputs in = BorrowWhilePreempting(BorrowWithinCohortPolicy::kLowerPriority);
  const AdmissionResult r = RunAdmissionPass(in, 0);
  ASSERT_THAT(Victims(r), ElementsAre("team-b.b2"));
  EXPECT_EQ(r.preemptions[0].rule, PreemptionRule::kInCohortReclaimWhileBorrowing);
}

TEST(QueueAdmission, BorrowWithinCohortNeverDoesNotPreemptToBorrow) {
  AdmissionInputs in = BorrowWhilePreempting(BorrowWithinCohortPolicy::kNever);
  const AdmissionResult r = RunAdmissionPass(in, 0);
  EXPECT_TRUE(r.preemptions.empty());
  EXPECT_EQ(FindPending(r, "team-a.urgent")->kind, WaitKind::kQuota);
}

TEST(QueueAdmission, BorrowWithinCohortRespectsMaxPriorityThreshold) {
  AdmissionInputs in = BorrowWhilePreempting(BorrowWithinCohortPolicy::kLowerPriority);
  in.cluster_queues[0].preemption.max_priority_threshold = -1;  // b2 has priority 0
  EXPECT_TRUE(RunAdmissionPass(in, 0).preemptions.empty());
  in.cluster_queues[0].preemption.max_priority_threshold = 0;
  EXPECT_THAT(Victims(RunAdmissionPass(in, 0)), ElementsAre("team-b.b2"));
}

TEST(QueueAdmission, NeverFitsNamesTheResourceGap) {
  AdmissionInputs in = WithDefaultFlavor();
  AddQueue(in, GpuQueue("team-a", 8, "research", 8));
  AddQueue(in, GpuQueue("team-b", 16, "research"));
  in.workloads.push_back(Job("team-a", "huge", 8, /*pods=*/8));
  Workload cpu = Job("team-a", "cpu", 0);
  cpu.per_pod[kCpu] = 1000;
  in.workloads.push_back(cpu);
  const AdmissionResult r = RunAdmissionPass(in, 0);
  EXPECT_EQ(FindPending(r, "team-a.huge")->message,
            "can never fit: needs 64 nvidia.com/gpu, ClusterQueue team-a can reach at most 16 "
            "with borrowing");
  EXPECT_EQ(FindPending(r, "team-a.cpu")->message,
            "can never fit: ClusterQueue team-a has no quota for cpu");
}

TEST(QueueAdmission, FairSharingServesTheLowestWeightedShareFirst) {
  AdmissionInputs in = WithDefaultFlavor();
  in.config.fair_sharing = true;
  AddQueue(in, GpuQueue("lender", 10, "research"));
  AddQueue(in, GpuQueue("team-a", 0, "research"));
  ClusterQueue b = GpuQueue("team-b", 0, "research");
  b.fair_weight = 2;
  AddQueue(in, b);
  for (int i = 0; i < 10; ++i) {
    in.workloads.push_back(Job("team-a", "a" + std::to_string(i), 1, 1, 0, i));
    in.workloads.push_back(Job("team-b", "b" + std::to_string(i), 1, 1, 0, 100 + i));
  }
  const AdmissionResult r = RunAdmissionPass(in, 0);
  int a = 0, b_count = 0;
  for (const auto& [key, adm] : r.admitted) (adm.cluster_queue == "team-a" ? a : b_count)++;
  EXPECT_EQ(a, 3);
  EXPECT_EQ(b_count, 7);
  // Without fair sharing, the older workloads (team-a's) take everything.
  in.config.fair_sharing = false;
  const AdmissionResult fifo = RunAdmissionPass(in, 0);
  for (const auto& [key, adm] : fifo.admitted) EXPECT_EQ(adm.cluster_queue, "team-a") << key;
}

TEST(QueueAdmission, TheQueueThatUsedLessRecentlyGetsTheNextFreeQuota) {
  AdmissionInputs in = WithDefaultFlavor();
  in.config.fair_sharing = true;
  in.config.usage_half_life_ms = 60'000;
  AddQueue(in, GpuQueue("lender", 1, "research"));
  AddQueue(in, GpuQueue("team-a", 0, "research"));
  AddQueue(in, GpuQueue("team-b", 0, "research"));
  in.workloads.push_back(Job("team-a", "a", 1, 1, 0, 1));  // older
  in.workloads.push_back(Job("team-b", "b", 1, 1, 0, 2));
  const int64_t now = 1'000'000;
  // Team-a used a lot a minute ago; team-b used less, just now.
  in.history.push_back({"team-a", {{kGpu, 2000.0}}, now - 60'000});  // 1000 now
  in.history.push_back({"team-b", {{kGpu, 600.0}}, now});
  AdmissionResult r = RunAdmissionPass(in, now);
  ASSERT_EQ(r.admitted.size(), 1u);
  EXPECT_EQ(r.admitted[0].first, "team-b.b");
  // Ten half-lives later team-a's use has decayed below team-b's.
  in.history[0].as_of_ms = now - 600'000;
  r = RunAdmissionPass(in, now);
  ASSERT_EQ(r.admitted.size(), 1u);
  EXPECT_EQ(r.admitted[0].first, "team-a.a");
}

TEST(QueueAdmission, UnlabelledWorkloadsGoToTheDefaultLocalQueue) {
  AdmissionInputs in = WithDefaultFlavor();
  AddQueue(in, GpuQueue("team-a", 1));
  in.config.default_local_queue = "q";
  Workload w1 = Job("team-a", "w1", 1, 1, 0, 1), w2 = Job("team-a", "w2", 1, 1, 0, 2);
  w1.local_queue.clear();
  w2.local_queue.clear();
  in.workloads = {w1, w2};
  AdmissionResult r = RunAdmissionPass(in, 0);
  ASSERT_NE(FindAdmitted(r, "team-a.w1"), nullptr);
  EXPECT_EQ(FindAdmitted(r, "team-a.w1")->cluster_queue, "team-a");
  EXPECT_EQ(FindPending(r, "team-a.w2")->kind, WaitKind::kQuota);
  // No default: unlabelled workloads are not managed by queues at all.
  in.config.default_local_queue.clear();
  r = RunAdmissionPass(in, 0);
  ASSERT_EQ(r.admitted.size(), 2u);
  EXPECT_TRUE(r.admitted[0].second.unmanaged);
}

TEST(QueueAdmission, WithoutQueueObjectsEverythingIsAdmitted) {
  AdmissionInputs in;
  in.config.default_local_queue = "q";
  in.workloads.push_back(Job("default", "a", 1000, 100));
  in.workloads.push_back(Job("team-x", "b", 1));
  in.workloads.push_back(Running(Job("team-x", "c", 1)));
  const AdmissionResult r = RunAdmissionPass(in, 0);
  ASSERT_EQ(r.admitted.size(), 2u);
  EXPECT_TRUE(r.admitted[0].second.unmanaged);
  EXPECT_TRUE(r.pending.empty());
}

TEST(QueueAdmission, ReportsMissingQueuesAndUnselectedNamespaces) {
  AdmissionInputs in = WithDefaultFlavor();
  ClusterQueue q = GpuQueue("team-a", 8);
  q.namespace_selector = LabelSelector{{{"team", "a"}}, {}};
  AddQueue(in, q);
  in.local_queues.push_back({"team-b", "q", "team-a"});
  in.local_queues.push_back({"team-c", "q", "nowhere"});
  in.namespace_labels["team-a"] = {{"team", "a"}};
  in.workloads.push_back(Job("team-a", "ok", 1));
  in.workloads.push_back(Job("team-b", "unselected", 1));
  in.workloads.push_back(Job("team-c", "no-cq", 1));
  in.workloads.push_back(Job("team-d", "no-lq", 1));
  const AdmissionResult r = RunAdmissionPass(in, 0);
  EXPECT_NE(FindAdmitted(r, "team-a.ok"), nullptr);
  EXPECT_EQ(FindPending(r, "team-b.unselected")->message,
            "namespace team-b is not selected by ClusterQueue team-a");
  EXPECT_EQ(FindPending(r, "team-c.no-cq")->message, "ClusterQueue nowhere not found");
  EXPECT_EQ(FindPending(r, "team-d.no-lq")->message, "LocalQueue team-d/q does not exist");
  EXPECT_EQ(FindPending(r, "team-d.no-lq")->kind, WaitKind::kNoLocalQueue);
}

// Kueue's resource-in-use finalizer: a ClusterQueue deleted while a job holds its quota is
// Terminating. It admits nothing new (its pending jobs say why), keeps the admitted job's usage
// counted, and lends in its cohort as before.
TEST(QueueAdmission, ATerminatingClusterQueueAdmitsNothingNewAndKeepsItsUsage) {
  AdmissionInputs in = WithDefaultFlavor();
  ClusterQueue a = GpuQueue("team-a", 8, "research");
  a.terminating = true;
  AddQueue(in, a);
  AddQueue(in, GpuQueue("team-b", 0, "research"));
  in.workloads.push_back(Running(Job("team-a", "old", 2)));
  in.workloads.push_back(Job("team-a", "new", 1, 1, 0, 1));
  in.workloads.push_back(Job("team-b", "borrower", 6, 1, 0, 2));
  in.workloads.push_back(Job("team-b", "too-much", 1, 1, 0, 3));
  const AdmissionResult r = RunAdmissionPass(in, 0);
  const PendingWorkload* fresh = FindPending(r, "team-a.new");
  ASSERT_NE(fresh, nullptr);
  EXPECT_EQ(fresh->kind, WaitKind::kClusterQueueTerminating);
  EXPECT_EQ(fresh->message, "ClusterQueue team-a is terminating: it admits no new job");
  EXPECT_EQ(FindAdmitted(r, "team-a.new"), nullptr);
  // team-a's 8 minus old's 2 are lent: borrower takes 6, nothing is left for too-much.
  EXPECT_NE(FindAdmitted(r, "team-b.borrower"), nullptr);
  EXPECT_EQ(FindPending(r, "team-b.too-much")->kind, WaitKind::kQuota);
  EXPECT_TRUE(UsageWithinQuota(ApplyAdmissionResult(in, r, 1, false)).ok());
}

TEST(QueueAdmission, UnsetNamespaceSelectorSelectsNothing) {
  AdmissionInputs in = WithDefaultFlavor();
  ClusterQueue q = GpuQueue("team-a", 8);
  q.namespace_selector.reset();
  AddQueue(in, q);
  in.workloads.push_back(Job("team-a", "w", 1));
  EXPECT_EQ(RunAdmissionPass(in, 0).pending.at(0).kind, WaitKind::kNamespaceNotSelected);
}

TEST(QueueAdmission, AClusterQueueWithAnUndefinedFlavorIsInactive) {
  AdmissionInputs in;  // no ResourceFlavor "default"
  AddQueue(in, GpuQueue("team-a", 8));
  in.workloads.push_back(Job("team-a", "w", 1));
  EXPECT_EQ(RunAdmissionPass(in, 0).pending.at(0).message,
            "ClusterQueue team-a is inactive: ResourceFlavor default not found");
}

TEST(QueueAdmission, TriesFlavorsInOrderAndHonoursNodeSelector) {
  AdmissionInputs in;
  in.flavors.push_back({"h100", {{"gpu-model", "h100"}}});
  in.flavors.push_back({"a100", {{"gpu-model", "a100"}}});
  ClusterQueue q;
  q.name = "team-a";
  q.resource_groups.push_back({{kCpu, kGpu},
                               {{"h100", {{kCpu, 8000, {}, {}}, {kGpu, 8, {}, {}}}},
                                {"a100", {{kCpu, 8000, {}, {}}, {kGpu, 8, {}, {}}}}}});
  AddQueue(in, q);
  Workload first = Job("team-a", "first", 6, 1, 0, 1);
  first.per_pod[kCpu] = 500;
  Workload second = Job("team-a", "second", 6, 1, 0, 2);  // h100 is full now: a100
  Workload pinned = Job("team-a", "pinned", 2, 1, 0, 3);
  pinned.node_selector["gpu-model"] = "a100";  // fits on h100, but asks a100 (now 2 free)
  Workload nowhere = Job("team-a", "nowhere", 1, 1, 0, 4);
  nowhere.node_selector["gpu-model"] = "v100";
  in.workloads = {first, second, pinned, nowhere};
  const AdmissionResult r = RunAdmissionPass(in, 0);
  const Admission* a = FindAdmitted(r, "team-a.first");
  ASSERT_NE(a, nullptr);
  for (const ResourceAssignment& ra : a->resources) EXPECT_EQ(ra.flavor, "h100");
  EXPECT_EQ(FindAdmitted(r, "team-a.second")->resources.at(0).flavor, "a100");
  EXPECT_EQ(FindAdmitted(r, "team-a.pinned")->resources.at(0).flavor, "a100");
  EXPECT_EQ(FindPending(r, "team-a.nowhere")->kind, WaitKind::kNeverFits);
}

TEST(QueueAdmission, WaitReasonNamesTheFlavorWhenThereIsAChoice) {
  AdmissionInputs in;
  in.flavors = {{"h100", {}}, {"a100", {}}};
  ClusterQueue q;
  q.name = "team-a";
  q.resource_groups.push_back(
      {{kGpu}, {{"h100", {{kGpu, 2, {}, {}}}}, {"a100", {{kGpu, 2, {}, {}}}}}});
  AddQueue(in, q);
  in.workloads.push_back(Running(Job("team-a", "r1", 1), 0));
  in.workloads.back().admission->resources[0].flavor = "h100";
  in.workloads.push_back(Job("team-a", "w", 2));
  in.workloads.push_back(Job("team-a", "w2", 2, 1, 0, 1));
  const AdmissionResult r = RunAdmissionPass(in, 0);
  EXPECT_EQ(FindAdmitted(r, "team-a.w")->resources.at(0).flavor, "a100");
  EXPECT_EQ(FindPending(r, "team-a.w2")->message,
            "waiting for 2 nvidia.com/gpu of flavor h100 in ClusterQueue team-a, 1 free");
}

TEST(QueueAdmission, UsageWithinQuotaReportsOverQuota) {
  AdmissionInputs in = WithDefaultFlavor();
  AddQueue(in, GpuQueue("team-a", 2));
  in.workloads.push_back(Running(Job("team-a", "a", 2)));
  EXPECT_TRUE(UsageWithinQuota(in).ok());
  in.workloads.push_back(Running(Job("team-a", "b", 1)));
  const Status s = UsageWithinQuota(in);
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), ::testing::HasSubstr("team-a"));
  // An over-quota input (the quota was lowered) is reported, not a crash, and admits nothing.
  in.workloads.push_back(Job("team-a", "c", 1));
  EXPECT_TRUE(RunAdmissionPass(in, 0).admitted.empty());
}

TEST(QueueAdmission, ResourceGroupsChooseTheirFlavorsApart) {
  AdmissionInputs in;
  in.flavors = {{"h100", {}}, {"cpu-pool", {}}};
  ClusterQueue q;
  q.name = "team-a";
  q.resource_groups.push_back({{kGpu}, {{"h100", {{kGpu, 8, {}, {}}}}}});
  q.resource_groups.push_back(
      {{kCpu, kMemory},
       {{"cpu-pool", {{kCpu, 64'000, {}, {}}, {kMemory, int64_t{256} << 30, {}, {}}}}}});
  AddQueue(in, q);
  Workload w = Job("team-a", "train", 4, /*pods=*/2, 0, 1);
  w.per_pod[kCpu] = 16'000;
  w.per_pod[kMemory] = int64_t{64} << 30;
  Workload big = Job("team-a", "memory-hungry", 0, 1, 0, 2);
  big.per_pod[kMemory] = int64_t{200} << 30;
  in.workloads = {w, big};
  const AdmissionResult r = RunAdmissionPass(in, 0);
  const Admission* a = FindAdmitted(r, "team-a.train");
  ASSERT_NE(a, nullptr);
  ASSERT_EQ(a->resources.size(), 3u);
  for (const ResourceAssignment& ra : a->resources) {
    EXPECT_EQ(ra.flavor, ra.resource == kGpu ? "h100" : "cpu-pool") << ra.resource;
    if (ra.resource == kCpu) EXPECT_EQ(ra.amount, 32'000);
  }
  // Quantities are shown as Kubernetes writes them.
  EXPECT_EQ(FindPending(r, "team-a.memory-hungry")->message,
            "waiting for 200Gi memory in ClusterQueue team-a, 128Gi free");
}

TEST(QueueAdmission, AStrictFifoHeadThatPreemptsStillBlocks) {
  AdmissionInputs in = FullQueueWith(WithinClusterQueuePolicy::kLowerPriority);
  in.cluster_queues[0].strategy = QueueingStrategy::kStrictFifo;
  in.workloads.push_back(Job("team-a", "llm-7", 4, 1, 1000, 40));
  in.workloads.push_back(Job("team-a", "behind", 1, 1, 0, 50));
  const AdmissionResult r = RunAdmissionPass(in, 0);
  EXPECT_EQ(FindPending(r, "team-a.llm-7")->kind, WaitKind::kPreempting);
  EXPECT_EQ(FindPending(r, "team-a.behind")->kind, WaitKind::kBlocked);
}

TEST(QueueAdmission, AZeroWeightQueueOnlyGetsWhatNobodyElseWants) {
  AdmissionInputs in = WithDefaultFlavor();
  in.config.fair_sharing = true;
  AddQueue(in, GpuQueue("lender", 2, "research"));
  ClusterQueue a = GpuQueue("team-a", 0, "research");
  a.fair_weight = 0;
  AddQueue(in, a);
  AddQueue(in, GpuQueue("team-b", 0, "research"));
  in.workloads.push_back(Job("team-a", "a1", 1, 1, 0, 1));
  in.workloads.push_back(Job("team-b", "b1", 1, 1, 0, 2));
  in.workloads.push_back(Job("team-b", "b2", 1, 1, 0, 3));
  const AdmissionResult r = RunAdmissionPass(in, 0);
  EXPECT_NE(FindAdmitted(r, "team-b.b1"), nullptr);
  EXPECT_NE(FindAdmitted(r, "team-b.b2"), nullptr);
  EXPECT_EQ(FindPending(r, "team-a.a1")->kind, WaitKind::kQuota);
}

TEST(QueueAdmission, ARequestThatOverflowsCanNeverFit) {
  AdmissionInputs in = WithDefaultFlavor();
  AddQueue(in, GpuQueue("team-a", 8));
  in.workloads.push_back(Job("team-a", "overflow", int64_t{1} << 62, 4));
  in.workloads.push_back(Job("team-a", "no-pods", 1, 0));
  const AdmissionResult r = RunAdmissionPass(in, 0);
  EXPECT_EQ(FindPending(r, "team-a.overflow")->kind, WaitKind::kNeverFits);
  EXPECT_EQ(FindPending(r, "team-a.no-pods")->kind, WaitKind::kNeverFits);
}

// Team-b borrowed the whole lender; team-a has no nominal quota of its own.
AdmissionInputs OneQueueTookEverything(bool fair_sharing) {
  AdmissionInputs in = WithDefaultFlavor();
  in.config.fair_sharing = fair_sharing;
  AddQueue(in, GpuQueue("lender", 8, "research"));
  ClusterQueue a = GpuQueue("team-a", 0, "research");
  a.preemption.reclaim_within_cohort = ReclaimWithinCohortPolicy::kAny;
  AddQueue(in, a);
  AddQueue(in, GpuQueue("team-b", 0, "research"));
  for (int i = 0; i < 8; ++i)
    in.workloads.push_back(Running(Job("team-b", "b" + std::to_string(i), 1, 1, 0, i), 10 + i));
  in.workloads.push_back(Job("team-a", "a0", 1, 1, 0, 100));
  return in;
}

TEST(QueueAdmission, FairSharingPreemptsFromTheQueueAboveItsShare) {
  AdmissionResult r = RunAdmissionPass(OneQueueTookEverything(true), 0);
  ASSERT_THAT(Victims(r), ElementsAre("team-b.b7"));  // the newest
  EXPECT_EQ(r.preemptions[0].rule, PreemptionRule::kInCohortFairSharing);
  EXPECT_STREQ(PreemptionRuleName(r.preemptions[0].rule), "InCohortFairSharing");
  // Without fair sharing, a queue with no nominal quota cannot take anything back.
  r = RunAdmissionPass(OneQueueTookEverything(false), 0);
  EXPECT_TRUE(r.preemptions.empty());
}

TEST(QueueAdmission, FairSharingStopsPreemptingAtTheFairShare) {
  AdmissionInputs in = OneQueueTookEverything(true);
  // Pass by pass, victims stopped each time: team-a reaches half of the lender and no more.
  int64_t now = 0;
  for (int i = 1; i < 8; ++i)
    in.workloads.push_back(Job("team-a", "a" + std::to_string(i), 1, 1, 0, 100 + i));
  for (int pass = 0; pass < 20; ++pass) {
    const AdmissionResult r = RunAdmissionPass(in, now);
    in = ApplyAdmissionResult(in, r, now, true);
    ASSERT_TRUE(UsageWithinQuota(in).ok());
    now += 1000;
  }
  int a = 0, b = 0;
  for (const Workload& w : in.workloads)
    if (w.admission) (w.admission->cluster_queue == "team-a" ? a : b)++;
  EXPECT_EQ(a, 4);
  EXPECT_EQ(b, 4);
}

}  // namespace
}  // namespace trainlet::coordinator::admission
