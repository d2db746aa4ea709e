// Ordering, label selectors, decayed usage and the words of admission.
#include "coordinator/admission_order.h"

#include <gtest/gtest.h>

#include "coordinator/admission_reasons.h"

namespace trainlet::coordinator::admission {
namespace {

TEST(AdmissionOrder, SelectorMatchesLabelsAndExpressions) {
  const std::map<std::string, std::string> labels{{"team", "a"}, {"tier", "gold"}};
  EXPECT_TRUE(SelectorMatches({}, labels));
  EXPECT_TRUE(SelectorMatches({{{"team", "a"}}, {}}, labels));
  EXPECT_FALSE(SelectorMatches({{{"team", "b"}}, {}}, labels));
  using Op = LabelRequirement::Op;
  EXPECT_TRUE(SelectorMatches({{}, {{"tier", Op::kIn, {"gold", "silver"}}}}, labels));
  EXPECT_FALSE(SelectorMatches({{}, {{"tier", Op::kNotIn, {"gold"}}}}, labels));
  EXPECT_TRUE(SelectorMatches({{}, {{"team", Op::kExists, {}}}}, labels));
  EXPECT_FALSE(SelectorMatches({{}, {{"team", Op::kDoesNotExist, {}}}}, labels));
  EXPECT_FALSE(SelectorMatches({{}, {{"zone", Op::kIn, {"z"}}}}, labels));
}

TEST(AdmissionOrder, QueueOrderIsPriorityThenAgeThenKey) {
  Workload a, b;
  a.key = "a";
  b.key = "b";
  a.priority = 1;
  EXPECT_TRUE(QueueOrderLess(a, b));
  b.priority = 1;
  b.creation_ms = -1;
  EXPECT_TRUE(QueueOrderLess(b, a));
  b.creation_ms = 0;
  EXPECT_TRUE(QueueOrderLess(a, b));
  EXPECT_FALSE(QueueOrderLess(a, a));
}

TEST(AdmissionOrder, HeadsWithinNominalGoBeforeBorrowersThenShare) {
  const std::string ka = "a", kb = "b";
  HeadKey a{false, 0, 0, 0, 5, &ka}, b{true, 0, 0, 100, 0, &kb};
  EXPECT_TRUE(HeadKeyLess(a, b));  // not borrowing beats priority
  a.borrowing = true;
  EXPECT_TRUE(HeadKeyLess(b, a));  // then priority
  a.share = 1;
  b.share = 2;
  EXPECT_TRUE(HeadKeyLess(a, b));  // then the lower share
  b.share = 1;
  b.history_share = 3;
  a.history_share = 2;
  EXPECT_TRUE(HeadKeyLess(a, b));  // then who used less recently
}

TEST(AdmissionOrder, UsageDecaysByHalfEachHalfLife) {
  EXPECT_DOUBLE_EQ(DecayedUsage(100, 0, 1000, 1000), 50);
  EXPECT_DOUBLE_EQ(DecayedUsage(100, 0, 3000, 1000), 12.5);
  EXPECT_DOUBLE_EQ(DecayedUsage(100, 0, 3000, 0), 100);
  EXPECT_DOUBLE_EQ(DecayedUsage(100, 5000, 3000, 1000), 100);
}

TEST(AdmissionOrder, AdvanceUsageHistoryDecaysAndAddsCurrentUse) {
  std::vector<UsageHistory> h{{"a", {{"gpu", 100}}, 0}};
  h = AdvanceUsageHistory(h, {{"a", {{"gpu", 4}}}, {"b", {{"gpu", 1}}}}, 10'000, 10'000);
  ASSERT_EQ(h.size(), 2u);
  EXPECT_DOUBLE_EQ(h[0].usage["gpu"], 50 + 4 * 10);  // decayed, plus 4 GPUs for 10 s
  EXPECT_EQ(h[0].as_of_ms, 10'000);
  EXPECT_EQ(h[1].cluster_queue, "b");
  EXPECT_TRUE(h[1].usage.empty());
}

TEST(AdmissionReasons, FormatsQuantitiesAsKubernetesDoes) {
  EXPECT_EQ(FormatAmount("cpu", 4000), "4");
  EXPECT_EQ(FormatAmount("cpu", 500), "500m");
  EXPECT_EQ(FormatAmount("memory", int64_t{8} << 30), "8Gi");
  EXPECT_EQ(FormatAmount("memory", int64_t{1536} << 20), "1536Mi");
  EXPECT_EQ(FormatAmount("memory", 1000), "1000");
  EXPECT_EQ(FormatAmount("nvidia.com/gpu", 8), "8");
}

TEST(AdmissionReasons, Messages) {
  EXPECT_EQ(WorkloadName("team-a", "team-a.llm-7"), "team-a/llm-7");
  EXPECT_EQ(WorkloadName("default", "llm-7"), "default/llm-7");
  EXPECT_EQ(PreemptedByMessage("team-a/llm-7", 1000), "Preempted by team-a/llm-7 (priority 1000)");
  EXPECT_EQ(WaitingForQuotaMessage("nvidia.com/gpu", "", 4, "team-a", 0, {{"team-b", 8}}),
            "waiting for 4 nvidia.com/gpu in ClusterQueue team-a, 0 free, 8 borrowed by team-b");
  EXPECT_EQ(NeverFitsMessage("nvidia.com/gpu", "", 64, "team-a", 16, true),
            "can never fit: needs 64 nvidia.com/gpu, ClusterQueue team-a can reach at most 16 "
            "with borrowing");
}

}  // namespace
}  // namespace trainlet::coordinator::admission
