// AssignFlavors: flavor order, nodeSelector, fit / preempt / never.
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

}  // namespace
}  // namespace trainlet::coordinator::admission
