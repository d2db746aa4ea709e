// Issue 18, "Working directory": the cwd every plugin's workers get (the runtime container's
// workingDir, the shared directory), the annotation that asks for it, and its node selector.
#include "coordinator/working_dir.h"

#include <gtest/gtest.h>

namespace trainlet::coordinator {
namespace {

std::vector<v1::LaunchPlan> TwoPlans() {
  std::vector<v1::LaunchPlan> plans(2);
  for (auto& p : plans) {
    p.add_workers()->set_rank(0);
    auto* step = p.add_workers();
    step->set_step("dataset-initializer");
  }
  return plans;
}

TEST(WorkDirPlaceOf, NodeSharedOrRefused) {
  EXPECT_EQ(*WorkDirPlaceOf({}), WorkDirPlace::kNode);
  EXPECT_EQ(*WorkDirPlaceOf({{"trainlet.io/working-dir", "node"}}), WorkDirPlace::kNode);
  EXPECT_EQ(*WorkDirPlaceOf({{"trainlet.io/working-dir", "shared"}}), WorkDirPlace::kShared);
  auto bad = WorkDirPlaceOf({{"trainlet.io/working-dir", "nfs"}});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "metadata.annotations[trainlet.io/working-dir]: must be node or shared, got \"nfs\"");
}

TEST(SharedDirSelector, OnlySharedJobsSelectTheLabel) {
  EXPECT_TRUE(SharedDirSelector(WorkDirPlace::kNode).empty());
  EXPECT_EQ(SharedDirSelector(WorkDirPlace::kShared),
            (std::map<std::string, std::string>{{"trainlet.io/shared-dir", "true"}}));
}

TEST(SetWorkerCwds, NoWorkingDirLeavesTheAgentsDefault) {
  auto plans = TwoPlans();
  ASSERT_TRUE(SetWorkerCwds(PlanRequest{}, plans).ok());
  for (const auto& p : plans) {
    for (const auto& w : p.workers()) EXPECT_EQ(w.cwd(), "");
  }
}

TEST(SetWorkerCwds, TheMainWorkersGetTheWorkingDir) {
  PlanRequest req;
  req.working_dir = "out/run";
  auto plans = TwoPlans();
  ASSERT_TRUE(SetWorkerCwds(req, plans).ok());
  for (const auto& p : plans) {
    EXPECT_EQ(p.workers(0).cwd(), "out/run");
    EXPECT_EQ(p.workers(1).cwd(), "");  // a step has its own container
  }
}

TEST(SetWorkerCwds, SharedPutsEveryWorkerUnderTheSharedDir) {
  PlanRequest req;
  req.annotations["trainlet.io/working-dir"] = "shared";
  auto plans = TwoPlans();
  ASSERT_TRUE(SetWorkerCwds(req, plans).ok());
  EXPECT_EQ(plans[1].workers(0).cwd(), "$(TRAINLET_SHARED_WORK_DIR)");
  EXPECT_EQ(plans[1].workers(1).cwd(), "$(TRAINLET_SHARED_WORK_DIR)");

  req.working_dir = "out";
  plans = TwoPlans();
  ASSERT_TRUE(SetWorkerCwds(req, plans).ok());
  EXPECT_EQ(plans[0].workers(0).cwd(), "$(TRAINLET_SHARED_WORK_DIR)/out");

  req.working_dir = "/abs";  // an absolute workingDir is the same path on every node already
  plans = TwoPlans();
  ASSERT_TRUE(SetWorkerCwds(req, plans).ok());
  EXPECT_EQ(plans[0].workers(0).cwd(), "/abs");
}

TEST(SetWorkerCwds, APluginsOwnCwdIsKept) {
  PlanRequest req;
  req.working_dir = "out";
  req.annotations["trainlet.io/working-dir"] = "shared";
  auto plans = TwoPlans();
  plans[0].mutable_workers(0)->set_cwd("/plugin");
  ASSERT_TRUE(SetWorkerCwds(req, plans).ok());
  EXPECT_EQ(plans[0].workers(0).cwd(), "/plugin");
}

TEST(SetWorkerCwds, ABadAnnotationIsRefused) {
  PlanRequest req;
  req.annotations["trainlet.io/working-dir"] = "everywhere";
  auto plans = TwoPlans();
  EXPECT_FALSE(SetWorkerCwds(req, plans).ok());
}

}  // namespace
}  // namespace trainlet::coordinator
