// RunAdmissionPass on thousands of random clusters of queues: quota is never exceeded, nothing
// is admitted twice, and every workload left pending says why.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>

#include "coordinator/queue_admission.h"

namespace trainlet::coordinator::admission {
namespace {

constexpr char kGpu[] = "nvidia.com/gpu";

struct Gen {
  std::mt19937 rng;
  explicit Gen(uint32_t seed) : rng(seed) {}
  int Int(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); }
  bool Chance(int percent) { return Int(0, 99) < percent; }
  template <typename E>
  E Pick(std::initializer_list<E> values) {
    return *(values.begin() + Int(0, static_cast<int>(values.size()) - 1));
  }
};

ClusterQueue RandomQueue(Gen& g, int index) {
  ClusterQueue q;
  q.name = "cq" + std::to_string(index);
  q.cohort = g.Chance(75) ? "cohort" + std::to_string(g.Int(0, 2)) : "";
  q.strategy = g.Pick({QueueingStrategy::kBestEffortFifo, QueueingStrategy::kStrictFifo});
  q.preemption.within_cluster_queue =
      g.Pick({WithinClusterQueuePolicy::kNever, WithinClusterQueuePolicy::kLowerPriority,
              WithinClusterQueuePolicy::kLowerOrNewerEqualPriority});
  q.preemption.reclaim_within_cohort =
      g.Pick({ReclaimWithinCohortPolicy::kNever, ReclaimWithinCohortPolicy::kLowerPriority,
              ReclaimWithinCohortPolicy::kAny});
  q.preemption.borrow_within_cohort =
      g.Pick({BorrowWithinCohortPolicy::kNever, BorrowWithinCohortPolicy::kLowerPriority});
  if (g.Chance(30)) q.preemption.max_priority_threshold = g.Int(-2, 5);
  q.fair_weight = g.Pick({0.0, 0.5, 1.0, 2.0});
  ResourceGroup group;
  group.covered_resources = {kGpu, kCpu};
  const int flavors = g.Int(1, 2);
  for (int f = 0; f < flavors; ++f) {
    FlavorQuotas fq;
    fq.flavor = f == 0 ? "f0" : "f1";
    for (const char* r : {kGpu, kCpu}) {
      ResourceQuota rq;
      rq.resource = r;
      rq.nominal = g.Int(0, 12) * (r == kCpu ? 1000 : 1);
      if (g.Chance(40)) rq.borrowing_limit = g.Int(0, 8) * (r == kCpu ? 1000 : 1);
      if (g.Chance(40)) rq.lending_limit = g.Int(0, 12) * (r == kCpu ? 1000 : 1);
      fq.resources.push_back(rq);
    }
    group.flavors.push_back(fq);
  }
  q.resource_groups.push_back(group);
  return q;
}

Workload RandomWorkload(Gen& g, int index, int queues) {
  Workload w;
  w.namespace_ = "ns" + std::to_string(g.Int(0, queues));  // ns<queues> has no LocalQueue
  w.key = w.namespace_ + ".w" + std::to_string(index);
  w.local_queue = g.Chance(95) ? "q" : "missing";
  w.priority = g.Int(-1, 4);
  w.creation_ms = g.Int(0, 1000);
  w.pod_count = g.Int(1, 3);
  if (g.Chance(85)) w.per_pod[kGpu] = g.Int(1, 4);
  if (g.Chance(50)) w.per_pod[kCpu] = g.Int(0, 3) * 500;
  if (g.Chance(10)) w.node_selector["model"] = g.Pick({"x", "y"});
  return w;
}

AdmissionInputs RandomInputs(Gen& g) {
  AdmissionInputs in;
  in.flavors = {{"f0", {{"model", "x"}}}, {"f1", {{"model", "y"}}}};
  const int queues = g.Int(1, 6);
  for (int i = 0; i < queues; ++i) {
    in.cluster_queues.push_back(RandomQueue(g, i));
    // Namespace ns<i> feeds cq<i>, or now and then a neighbour or a queue that does not exist.
    const int target = g.Chance(90) ? i : g.Int(0, queues);
    in.local_queues.push_back({"ns" + std::to_string(i), "q", "cq" + std::to_string(target)});
  }
  in.config.fair_sharing = g.Chance(50);
  in.config.usage_half_life_ms = g.Chance(50) ? 60'000 : 0;
  for (int i = 0; i < queues; ++i) {
    if (g.Chance(50))
      in.history.push_back(
          {"cq" + std::to_string(i), {{kGpu, 1.0 * g.Int(0, 1000)}}, g.Int(0, 100'000)});
  }
  const int workloads = g.Int(0, 40);
  for (int i = 0; i < workloads; ++i) in.workloads.push_back(RandomWorkload(g, i, queues));
  return in;
}

// Checks one pass's result against its inputs; returns the state after the victims stopped.
AdmissionInputs CheckPass(const AdmissionInputs& in, const AdmissionResult& r, int64_t now) {
  std::set<std::string> pending_before, admitted_before;
  for (const Workload& w : in.workloads)
    (w.admission ? admitted_before : pending_before).insert(w.key);
  std::set<std::string> seen;
  for (const auto& [key, admission] : r.admitted) {
    EXPECT_TRUE(pending_before.count(key)) << key << " admitted but was not pending";
    EXPECT_TRUE(seen.insert(key).second) << key << " admitted twice";
  }
  for (const PendingWorkload& p : r.pending) {
    EXPECT_TRUE(pending_before.count(p.key)) << p.key;
    EXPECT_TRUE(seen.insert(p.key).second) << p.key << " both admitted and pending";
    EXPECT_FALSE(p.message.empty()) << p.key << " waits without a reason";
  }
  EXPECT_EQ(seen.size(), pending_before.size()) << "every pending workload is accounted for";
  std::set<std::string> victims;
  for (const Preemption& p : r.preemptions) {
    EXPECT_TRUE(admitted_before.count(p.victim)) << p.victim << " preempted but not running";
    EXPECT_TRUE(victims.insert(p.victim).second) << p.victim << " preempted twice";
  }
  // While the victims still run, and after they stopped, usage is within quota.
  const Status running = UsageWithinQuota(ApplyAdmissionResult(in, r, now, false));
  EXPECT_TRUE(running.ok()) << running.message();
  AdmissionInputs next = ApplyAdmissionResult(in, r, now, true);
  const Status stopped = UsageWithinQuota(next);
  EXPECT_TRUE(stopped.ok()) << stopped.message();
  return next;
}

TEST(QueueAdmissionProperty, RandomClustersNeverGoOverQuota) {
  int scenarios = 0, admitted = 0, preempted = 0;
  for (uint32_t seed = 1; seed <= 1500; ++seed) {
    Gen g(seed);
    AdmissionInputs state = RandomInputs(g);
    int64_t now = 100'000;
    for (int pass = 0; pass < 4 && !::testing::Test::HasFailure(); ++pass) {
      const AdmissionResult r = RunAdmissionPass(state, now);
      admitted += static_cast<int>(r.admitted.size());
      preempted += static_cast<int>(r.preemptions.size());
      state = CheckPass(state, r, now);
      // Some running workloads finish, new ones arrive.
      std::erase_if(state.workloads,
                    [&](const Workload& w) { return w.admission && g.Chance(20); });
      for (int i = 0; i < g.Int(0, 5); ++i)
        state.workloads.push_back(RandomWorkload(g, 1000 * (pass + 1) + i,
                                                 static_cast<int>(state.cluster_queues.size())));
      now += 10'000;
    }
    ++scenarios;
    if (::testing::Test::HasFailure()) {
      ADD_FAILURE() << "seed " << seed;
      break;
    }
  }
  // The generator must exercise the rules, not just leave everything pending.
  EXPECT_GT(admitted, 1000);
  EXPECT_GT(preempted, 20);
  EXPECT_EQ(scenarios, 1500);
}

// The same inputs in any order give the same decisions.
TEST(QueueAdmissionProperty, TheOrderOfTheInputsDoesNotMatter) {
  for (uint32_t seed = 1; seed <= 300; ++seed) {
    Gen g(seed);
    AdmissionInputs in = RandomInputs(g);
    // Some admitted first, so preemption has victims.
    in = ApplyAdmissionResult(in, RunAdmissionPass(in, 0), 0, true);
    for (int i = 0; i < 10; ++i) in.workloads.push_back(RandomWorkload(g, 500 + i, 6));
    AdmissionInputs shuffled = in;
    std::shuffle(shuffled.workloads.begin(), shuffled.workloads.end(), g.rng);
    const AdmissionResult a = RunAdmissionPass(in, 0), b = RunAdmissionPass(shuffled, 0);
    auto decisions = [](const AdmissionResult& r) {
      std::set<std::string> out;
      for (const auto& [key, adm] : r.admitted) {
        std::string d = "admit " + key + " " + adm.cluster_queue;
        for (const ResourceAssignment& ra : adm.resources)
          d += " " + ra.resource + "/" + ra.flavor + "=" + std::to_string(ra.amount);
        out.insert(d);
      }
      for (const Preemption& p : r.preemptions)
        out.insert("preempt " + p.victim + " " + p.preemptor);
      for (const PendingWorkload& p : r.pending) out.insert("wait " + p.key + " " + p.message);
      return out;
    };
    ASSERT_EQ(decisions(a), decisions(b)) << "seed " << seed;
  }
}

// Workloads of equal priority and age wait in the order of their names, whatever the names share:
// long common prefixes, names differing only past 16 bytes of it, names that are prefixes of
// others, bytes above 0x7f. The pass sorts on 16 bytes of each name after the queue's common
// prefix; this compares its order with std::string's.
TEST(QueueAdmissionProperty, EqualPriorityAndAgeWaitInTheOrderOfTheirNames) {
  for (uint32_t seed = 1; seed <= 200; ++seed) {
    Gen g(seed);
    AdmissionInputs in;
    in.flavors.push_back({"default", {}});
    ClusterQueue q;
    q.name = "cq";
    q.resource_groups.push_back({{kGpu}, {{"default", {{kGpu, 1, std::nullopt, std::nullopt}}}}});
    in.cluster_queues.push_back(q);
    in.local_queues.push_back({"default", "q", "cq"});
    const std::string prefix = std::string(g.Int(0, 30), 'p');
    std::set<std::string> names;
    const int count = g.Int(2, 60);
    while (static_cast<int>(names.size()) < count) {
      std::string name = prefix;
      // Mostly the same long middle, so many names differ only past 16 bytes of the prefix.
      if (g.Chance(70)) name += std::string(g.Int(0, 20), 'm');
      const int tail = g.Int(0, 4);
      for (int i = 0; i < tail; ++i) {
        name += g.Pick<char>({'a', 'b', '0', '9', '-', static_cast<char>(0xc3)});
      }
      names.insert(name);
    }
    std::vector<std::string> shuffled(names.begin(), names.end());
    std::shuffle(shuffled.begin(), shuffled.end(), g.rng);
    for (const std::string& name : shuffled) {
      Workload w;
      w.key = name;
      w.local_queue = "q";
      w.creation_ms = 7;
      w.per_pod[kGpu] = 1;
      in.workloads.push_back(w);
    }
    const AdmissionResult r = RunAdmissionPass(in, 0);
    // The first name is admitted into the one GPU; the others wait behind it in name order.
    ASSERT_EQ(r.admitted.size(), 1u) << "seed " << seed;
    std::vector<std::string> order = {r.admitted[0].first};
    std::vector<PendingWorkload> pending = r.pending;
    std::sort(pending.begin(), pending.end(),
              [](const auto& a, const auto& b) { return a.position < b.position; });
    for (const PendingWorkload& p : pending) order.push_back(p.key);
    ASSERT_EQ(order, std::vector<std::string>(names.begin(), names.end())) << "seed " << seed;
  }
}

}  // namespace
}  // namespace trainlet::coordinator::admission
