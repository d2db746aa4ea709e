// QuotaLedger: Kueue's nominal / borrowingLimit / lendingLimit arithmetic.
#include "coordinator/admission_quota.h"

#include <gtest/gtest.h>

namespace trainlet::coordinator::admission {
namespace {

TEST(QuotaLedger, WithoutACohortAQueueHasItsNominalQuota) {
  QuotaLedger l(1);
  const int a = l.AddClusterQueue(-1);
  l.SetQuota(a, 0, MakeSlotQuota(10, -1, -1));
  EXPECT_EQ(l.Available(a, 0), 10);
  EXPECT_EQ(l.Potential(a, 0), 10);
  l.AddUsed(a, 0, 7);
  EXPECT_EQ(l.Available(a, 0), 3);
  EXPECT_FALSE(l.Borrowing(a, 0));
}

TEST(QuotaLedger, BorrowsWhatTheCohortLendsWithinTheBorrowingLimit) {
  QuotaLedger l(1);
  const int c = l.AddCohort();
  const int a = l.AddClusterQueue(c), b = l.AddClusterQueue(c);
  l.SetQuota(a, 0, MakeSlotQuota(10, /*borrowing_limit=*/2, -1));
  l.SetQuota(b, 0, MakeSlotQuota(10, -1, -1));
  EXPECT_EQ(l.Available(a, 0), 12);
  EXPECT_EQ(l.Available(b, 0), 20);
  EXPECT_EQ(l.Potential(a, 0), 12);
  EXPECT_EQ(l.Potential(b, 0), 20);
  l.AddUsed(b, 0, 12);  // b borrows 2
  EXPECT_TRUE(l.Borrowing(b, 0));
  EXPECT_EQ(l.Available(a, 0), 8);  // a must reclaim to get its last 2
  EXPECT_EQ(l.Available(b, 0), 8);
  l.AddUsed(a, 0, 8);
  EXPECT_EQ(l.Available(a, 0), 0);
  EXPECT_EQ(l.Available(b, 0), 0);
}

TEST(QuotaLedger, KeepsWhatIsNotLent) {
  QuotaLedger l(1);
  const int c = l.AddCohort();
  const int a = l.AddClusterQueue(c), b = l.AddClusterQueue(c);
  l.SetQuota(a, 0, MakeSlotQuota(10, -1, /*lending_limit=*/4));
  l.SetQuota(b, 0, MakeSlotQuota(0, -1, -1));
  EXPECT_EQ(l.Available(b, 0), 4);
  EXPECT_EQ(l.Potential(b, 0), 4);
  l.AddUsed(b, 0, 4);
  EXPECT_EQ(l.Available(a, 0), 6);  // the guaranteed 6 stay
  l.AddUsed(a, 0, 6);
  EXPECT_EQ(l.Available(a, 0), 0);
  EXPECT_TRUE(l.UsedWithinQuota({"a", "b"}, {"gpu"}).ok());
}

TEST(QuotaLedger, RoomHeldForAPreemptorIsNotFree) {
  QuotaLedger l(1);
  const int a = l.AddClusterQueue(-1);
  l.SetQuota(a, 0, MakeSlotQuota(8, -1, -1));
  l.AddUsed(a, 0, 8);
  l.AddReleasing(a, 0, 4);  // a victim that still runs
  l.AddReserved(a, 0, 3);   // its preemptor
  EXPECT_EQ(l.Effective(a, 0), 8);
  EXPECT_EQ(l.Available(a, 0), 0);
  l.AddReserved(a, 0, 2);  // more than is being freed counts on top
  EXPECT_EQ(l.Effective(a, 0), 9);
}

TEST(QuotaLedger, VersionChangesWithUsageButNotWithTrials) {
  QuotaLedger l(1);
  const int c = l.AddCohort();
  const int a = l.AddClusterQueue(c), b = l.AddClusterQueue(c);
  l.SetQuota(a, 0, MakeSlotQuota(4, -1, -1));
  l.SetQuota(b, 0, MakeSlotQuota(4, -1, -1));
  const uint64_t v = l.Version(a);
  l.AddUsed(b, 0, 1, /*trial=*/true);
  l.AddUsed(b, 0, -1, true);
  EXPECT_EQ(l.Version(a), v);
  l.AddUsed(b, 0, 1);
  EXPECT_NE(l.Version(a), v);
}

TEST(QuotaLedger, DominantShareIsBorrowedOverLendableByWeight) {
  QuotaLedger l(2);  // two resources in one flavor
  const int c = l.AddCohort();
  const int a = l.AddClusterQueue(c), lender = l.AddClusterQueue(c);
  l.SetQuota(a, 0, MakeSlotQuota(0, -1, -1));
  l.SetQuota(a, 1, MakeSlotQuota(0, -1, -1));
  l.SetQuota(lender, 0, MakeSlotQuota(10, -1, -1));
  l.SetQuota(lender, 1, MakeSlotQuota(100, -1, -1));
  const std::vector<int> resource_of_slot{0, 1};
  EXPECT_EQ(l.DominantShare(a, {}, resource_of_slot, 1), 0);
  l.AddUsed(a, 0, 2);   // 20% of resource 0
  l.AddUsed(a, 1, 50);  // 50% of resource 1: dominant
  EXPECT_DOUBLE_EQ(l.DominantShare(a, {}, resource_of_slot, 1), 500);
  EXPECT_DOUBLE_EQ(l.DominantShare(a, {}, resource_of_slot, 2), 250);
  const std::vector<std::pair<int, int64_t>> six_more{{0, 6}};
  EXPECT_DOUBLE_EQ(l.DominantShare(a, six_more, resource_of_slot, 1), 800);
}

TEST(QuotaLedger, UsedWithinQuotaNamesTheQueueOverItsLimit) {
  QuotaLedger l(1);
  const int c = l.AddCohort();
  const int a = l.AddClusterQueue(c), b = l.AddClusterQueue(c);
  l.SetQuota(a, 0, MakeSlotQuota(4, /*borrowing_limit=*/1, -1));
  l.SetQuota(b, 0, MakeSlotQuota(4, -1, -1));
  l.AddUsed(a, 0, 5);
  EXPECT_TRUE(l.UsedWithinQuota({"a", "b"}, {"gpu"}).ok());
  l.AddUsed(a, 0, 1);
  Status s = l.UsedWithinQuota({"a", "b"}, {"gpu"});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "ClusterQueue a uses 6 of gpu, over its limit 5");
  l.AddUsed(a, 0, -2);
  l.AddUsed(b, 0, 5);  // 4 + 5 = 9 > 8 in the cohort
  s = l.UsedWithinQuota({"a", "b"}, {"gpu"});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "a cohort lends 9 of gpu but holds only 8");
}

}  // namespace
}  // namespace trainlet::coordinator::admission

namespace trainlet::coordinator::admission {
namespace {

// Quotas are at most 2^62 units each (common/quantity.h: `memory: 4Ei` is 2^62 bytes), but a
// cohort sums its members': two such ClusterQueues overflowed the cohort's int64 sum (undefined
// behaviour; in practice negative), and then nothing fitted anywhere in the cohort, not even
// one byte within a queue's own nominal quota. Now such a quota counts as unlimited.
TEST(QuotaLedger, HugeQuotasInOneCohortDoNotOverflow) {
  constexpr int64_t kHuge = int64_t{1} << 62;
  QuotaLedger l(1);
  const int c = l.AddCohort();
  const int a = l.AddClusterQueue(c), b = l.AddClusterQueue(c), d = l.AddClusterQueue(c);
  for (const int q : {a, b, d}) l.SetQuota(q, 0, MakeSlotQuota(kHuge, kHuge, -1));
  EXPECT_EQ(l.CohortLendable(c, 0), kUnlimited);
  EXPECT_EQ(l.Available(a, 0), kUnlimited);
  EXPECT_EQ(l.Potential(a, 0), kUnlimited);
  l.AddUsed(a, 0, 1);
  EXPECT_EQ(l.Available(b, 0), kUnlimited - 1);
  EXPECT_TRUE(l.UsedWithinQuota({"a", "b", "d"}, {"memory"}).ok());
  // A quota changed gives back exactly what it put in.
  l.SetQuota(d, 0, MakeSlotQuota(3, -1, -1));
  EXPECT_EQ(l.CohortLendable(c, 0), kUnlimited);
  l.SetQuota(b, 0, MakeSlotQuota(4, -1, -1));
  EXPECT_EQ(l.CohortLendable(c, 0), kUnlimited);  // a's own kUnlimited + 7, capped
  QuotaLedger m(1);
  const int mc = m.AddCohort();
  const int x = m.AddClusterQueue(mc), y = m.AddClusterQueue(mc);
  m.SetQuota(x, 0, MakeSlotQuota(kHuge, -1, -1));
  m.SetQuota(y, 0, MakeSlotQuota(kHuge, -1, -1));
  m.SetQuota(x, 0, MakeSlotQuota(3, -1, -1));
  m.SetQuota(y, 0, MakeSlotQuota(4, -1, -1));
  EXPECT_EQ(m.CohortLendable(mc, 0), 7);
}

}  // namespace
}  // namespace trainlet::coordinator::admission
