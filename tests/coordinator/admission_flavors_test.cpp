// AssignFlavors: flavor order, nodeSelector, taints and tolerations, flavorFungibility, fit /
// preempt / never.
#include "coordinator/admission_flavors.h"

#include <gtest/gtest.h>

namespace trainlet::coordinator::admission {
namespace {

// One queue, one group covering resource 0 ("gpu"), flavors "x" then "y" with 4 each.
struct TwoFlavors {
  Catalog catalog;
  ClusterQueue spec;
  QueueModel queue;
  QuotaLedger ledger{2};
  TwoFlavors() {
    catalog.resource_names = {"gpu"};
    catalog.flavor_names = {"x", "y"};
    catalog.flavor_labels = {{{"model", "x"}}, {{"model", "y"}}};
    catalog.flavor_declared = {true, true};
    catalog.resource_of_slot = {0, 0};
    spec.name = "q";
    queue.spec = &spec;
    queue.groups.push_back({{0}, {0, 1}});
    queue.group_of_resource = {0};
    ledger.AddClusterQueue(-1);
    ledger.SetQuota(0, 0, MakeSlotQuota(4, -1, -1));
    ledger.SetQuota(0, 1, MakeSlotQuota(4, -1, -1));
  }
  Assignment Assign(int64_t gpus, std::map<std::string, std::string> selector = {}) {
    const std::vector<std::pair<int, int64_t>> demand{{0, gpus}};
    return AssignFlavors(catalog, queue, 0, demand, selector, ledger, false);
  }
};

TEST(AssignFlavors, TakesTheFirstFlavorThatFits) {
  TwoFlavors t;
  Assignment a = t.Assign(3);
  EXPECT_EQ(a.mode, FitMode::kFit);
  ASSERT_EQ(a.choices.size(), 1u);
  EXPECT_EQ(a.choices[0].flavor, 0);
  t.ledger.AddUsed(0, 0, 2);
  a = t.Assign(3);
  EXPECT_EQ(a.mode, FitMode::kFit);
  EXPECT_EQ(a.choices[0].flavor, 1);
}

TEST(AssignFlavors, WhenNoneFitsRemembersTheFirstThatPreemptionCouldServe) {
  TwoFlavors t;
  t.ledger.AddUsed(0, 0, 2);
  t.ledger.AddUsed(0, 1, 3);
  const Assignment a = t.Assign(3);
  EXPECT_EQ(a.mode, FitMode::kPreempt);
  EXPECT_FALSE(a.never);
  EXPECT_EQ(a.choices[0].flavor, 0);
  EXPECT_EQ(a.short_slot, 0);
  EXPECT_EQ(a.short_need, 3);
}

TEST(AssignFlavors, SkipsFlavorsTheNodeSelectorRulesOut) {
  TwoFlavors t;
  Assignment a = t.Assign(1, {{"model", "y"}, {"zone", "z1"}});
  EXPECT_EQ(a.choices.at(0).flavor, 1);
  a = t.Assign(1, {{"model", "v100"}});
  EXPECT_TRUE(a.never);
  EXPECT_EQ(a.message,
            "can never fit: no flavor of ClusterQueue q for gpu matches its nodeSelector");
}

TEST(AssignFlavors, NeverWhenMoreThanAnyFlavorHolds) {
  TwoFlavors t;
  const Assignment a = t.Assign(5);
  EXPECT_TRUE(a.never);
  EXPECT_EQ(a.message, "can never fit: needs 5 gpu, ClusterQueue q has at most 4");
}

TEST(AssignFlavors, FlavorMatchesSelectorIgnoresKeysTheFlavorDoesNotLabel) {
  EXPECT_TRUE(FlavorMatchesSelector({{"zone", "a"}}, {{"model", "x"}}));
  EXPECT_FALSE(FlavorMatchesSelector({{"model", "y"}}, {{"model", "x"}}));
  EXPECT_TRUE(FlavorMatchesSelector({}, {{"model", "x"}}));
}

// ---- ResourceFlavor nodeTaints and tolerations ----

TEST(AssignFlavors, ATaintedFlavorIsSkippedUnlessTheWorkloadToleratesIt) {
  TwoFlavors t;
  t.catalog.flavor_taints = {{{"dedicated", "ml", "NoSchedule"}}, {}};
  t.catalog.flavor_tolerations = {{}, {}};
  const std::vector<std::pair<int, int64_t>> demand{{0, 1}};
  Assignment a = AssignFlavors(t.catalog, t.queue, 0, demand, {}, t.ledger, false);
  EXPECT_EQ(a.choices.at(0).flavor, 1);  // x is tainted: y
  a = AssignFlavors(t.catalog, t.queue, 0, demand, {}, t.ledger, false,
                    {{"dedicated", "Equal", "ml", "NoSchedule"}});
  EXPECT_EQ(a.choices.at(0).flavor, 0);
  a = AssignFlavors(t.catalog, t.queue, 0, demand, {}, t.ledger, false,
                    {{"dedicated", "Exists", "", ""}});
  EXPECT_EQ(a.choices.at(0).flavor, 0);
  a = AssignFlavors(t.catalog, t.queue, 0, demand, {}, t.ledger, false,
                    {{"dedicated", "Equal", "web", ""}});  // another value
  EXPECT_EQ(a.choices.at(0).flavor, 1);
}

TEST(AssignFlavors, TheFlavorsOwnTolerationsCount) {
  TwoFlavors t;
  t.catalog.flavor_taints = {{{"spot", "", "NoExecute"}}, {}};
  t.catalog.flavor_tolerations = {{{"spot", "Exists", "", "NoExecute"}}, {}};
  const Assignment a = t.Assign(1);
  EXPECT_EQ(a.choices.at(0).flavor, 0);
}

TEST(AssignFlavors, EveryFlavorTaintedIsNeverWithKueuesReason) {
  TwoFlavors t;
  t.catalog.flavor_taints = {{{"dedicated", "ml", "NoSchedule"}}, {{"gpu", "", "NoExecute"}}};
  const Assignment a = t.Assign(1);
  EXPECT_TRUE(a.never);
  EXPECT_EQ(a.message,
            "can never fit: no flavor of ClusterQueue q for gpu is tolerated: untolerated taint "
            "dedicated=ml:NoSchedule in flavor x");
}

TEST(AssignFlavors, UntoleratedTaintIgnoresPreferNoSchedule) {
  const std::vector<Taint> taints{{"a", "", "PreferNoSchedule"}, {"b", "1", "NoSchedule"}};
  const Taint* t = UntoleratedTaint(taints, {}, {});
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(TaintText(*t), "b=1:NoSchedule");
  EXPECT_EQ(UntoleratedTaint(taints, {{"", "Exists", "", ""}}, {}), nullptr);  // tolerates all
  EXPECT_NE(UntoleratedTaint(taints, {{"b", "Equal", "1", "NoExecute"}}, {}), nullptr);
}

// ---- flavorFungibility ----

// Queue 0 ("q", in a cohort with queue 1) has flavor x (nominal 2) then y (nominal 4) of "gpu";
// queue 1 lends 4 of x.
struct CohortFlavors {
  Catalog catalog;
  ClusterQueue spec, other_spec;
  QueueModel queue;
  QuotaLedger ledger{2};
  CohortFlavors() {
    catalog.resource_names = {"gpu"};
    catalog.flavor_names = {"x", "y"};
    catalog.flavor_labels = {{}, {}};
    catalog.flavor_declared = {true, true};
    catalog.resource_of_slot = {0, 0};
    spec.name = "q";
    spec.cohort = "c";
    queue.spec = &spec;
    queue.groups.push_back({{0}, {0, 1}});
    queue.group_of_resource = {0};
    const int cohort = ledger.AddCohort();
    ledger.AddClusterQueue(cohort);
    ledger.AddClusterQueue(cohort);
    ledger.SetQuota(0, 0, MakeSlotQuota(2, -1, -1));
    ledger.SetQuota(0, 1, MakeSlotQuota(4, -1, -1));
    ledger.SetQuota(1, 0, MakeSlotQuota(4, -1, -1));
  }
  Assignment Assign(int64_t gpus, bool can_preempt_while_borrowing = false) {
    const std::vector<std::pair<int, int64_t>> demand{{0, gpus}};
    return AssignFlavors(catalog, queue, 0, demand, {}, ledger, can_preempt_while_borrowing);
  }
};

TEST(FlavorFungibility, WhenCanBorrowBorrowTakesTheFirstFlavorThatFitsByBorrowing) {
  CohortFlavors t;  // Kueue's default
  const Assignment a = t.Assign(3);
  EXPECT_EQ(a.mode, FitMode::kFit);
  EXPECT_EQ(a.choices.at(0).flavor, 0);
  EXPECT_TRUE(a.borrowing);
}

TEST(FlavorFungibility, WhenCanBorrowTryNextFlavorPrefersALaterFlavorWithinNominal) {
  CohortFlavors t;
  t.spec.fungibility.try_next_when_can_borrow = true;
  Assignment a = t.Assign(3);
  EXPECT_EQ(a.mode, FitMode::kFit);
  EXPECT_EQ(a.choices.at(0).flavor, 1);
  EXPECT_FALSE(a.borrowing);
  // No later flavor does better: back to the first that fits by borrowing.
  t.ledger.AddUsed(0, 1, 3);
  a = t.Assign(3);
  EXPECT_EQ(a.mode, FitMode::kFit);
  EXPECT_EQ(a.choices.at(0).flavor, 0);
  EXPECT_TRUE(a.borrowing);
}

TEST(FlavorFungibility, WhenCanPreemptPreemptStaysOnTheFirstFlavor) {
  TwoFlavors t;
  t.ledger.AddUsed(0, 0, 3);  // x needs preemption for 2; y fits
  Assignment a = t.Assign(2);
  EXPECT_EQ(a.mode, FitMode::kFit);  // default TryNextFlavor: y
  EXPECT_EQ(a.choices.at(0).flavor, 1);
  t.spec.fungibility.try_next_when_can_preempt = false;
  a = t.Assign(2);
  EXPECT_EQ(a.mode, FitMode::kPreempt);
  EXPECT_EQ(a.choices.at(0).flavor, 0);
  EXPECT_EQ(a.short_slot, 0);
}

TEST(FlavorFungibility, PreemptThatWouldBorrowTriesNextUnderTryNextFlavorBorrowing) {
  CohortFlavors t;
  t.spec.fungibility.try_next_when_can_preempt = false;
  t.spec.fungibility.try_next_when_can_borrow = true;
  t.ledger.AddUsed(1, 0, 4);  // the cohort's x is all used: 3 of x only by preempting, borrowing
  Assignment a = t.Assign(3, true);
  EXPECT_EQ(a.mode, FitMode::kFit);
  EXPECT_EQ(a.choices.at(0).flavor, 1);
  t.spec.fungibility.try_next_when_can_borrow = false;  // Preempt + Borrow: x, by preempting
  a = t.Assign(3, true);
  EXPECT_EQ(a.mode, FitMode::kPreempt);
  EXPECT_EQ(a.choices.at(0).flavor, 0);
}

}  // namespace
}  // namespace trainlet::coordinator::admission
