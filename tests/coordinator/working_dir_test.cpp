// Issue 18, "Working directory": the cwd every plugin's workers get (the runtime container's
// workingDir, the shared directory), the annotation that asks for it, and its node selector.
#include "coordinator/working_dir.h"

#include <gtest/gtest.h>

#include "common/trainjob/v1_job.h"

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

// Issue 18: a job converted from a v1 kind runs each replica in its own container's workingDir
// (rank r is the r-th replica); main reported it ignored and ran every rank in the work dir.
TEST(SetWorkerCwds, AV1JobsReplicasEachGetTheirContainersWorkingDir) {
  trainjob::V1JobContract c;
  c.kind = trainjob::V1Kind::kPyTorchJob;
  c.name = "p";
  c.replicas.push_back({"Master", 1, {"python3"}, {}, std::nullopt, "", "master-dir"});
  c.replicas.push_back({"Worker", 2, {"python3"}, {}, std::nullopt, "", "/abs/worker"});
  PlanRequest req;
  req.working_dir = "master-dir";  // the runtime's container: the first replica's
  req.annotations[std::string(trainjob::kV1JobAnnotation)] = trainjob::EncodeV1Contract(c);
  std::vector<v1::LaunchPlan> plans(3);
  for (uint32_t n = 0; n < 3; ++n) {
    plans[n].add_workers()->set_rank(n);
    auto* step = plans[n].add_workers();
    step->set_rank(3 + n);
    step->set_step("dataset-initializer");
  }
  ASSERT_TRUE(SetWorkerCwds(req, plans).ok());
  EXPECT_EQ(plans[0].workers(0).cwd(), "master-dir");
  EXPECT_EQ(plans[1].workers(0).cwd(), "/abs/worker");
  EXPECT_EQ(plans[2].workers(0).cwd(), "/abs/worker");
  EXPECT_EQ(plans[1].workers(1).cwd(), "");  // a step's worker: its own container's
  // Shared: a relative one goes under the shared directory.
  req.annotations["trainlet.io/working-dir"] = "shared";
  c.replicas[1].working_dir = "w";
  req.annotations[std::string(trainjob::kV1JobAnnotation)] = trainjob::EncodeV1Contract(c);
  for (auto& p : plans) p.mutable_workers(0)->clear_cwd();
  ASSERT_TRUE(SetWorkerCwds(req, plans).ok());
  EXPECT_EQ(plans[2].workers(0).cwd(), "$(TRAINLET_SHARED_WORK_DIR)/w");
  // An MPIJob's main worker is its launcher: the runtime container's (the launcher's) workingDir.
  c.kind = trainjob::V1Kind::kMPIJob;
  c.replicas = {{"Launcher", 1, {"mpirun"}, {}, std::nullopt, "", "launch"},
                {"Worker", 2, {}, {}, std::nullopt, "", "elsewhere"}};
  req.annotations.erase("trainlet.io/working-dir");
  req.annotations[std::string(trainjob::kV1JobAnnotation)] = trainjob::EncodeV1Contract(c);
  req.working_dir = "launch";
  std::vector<v1::LaunchPlan> mpi(1);
  mpi[0].add_workers()->set_rank(0);
  ASSERT_TRUE(SetWorkerCwds(req, mpi).ok());
  EXPECT_EQ(mpi[0].workers(0).cwd(), "launch");
  // A malformed contract is refused, as the plugins refuse it.
  req.annotations[std::string(trainjob::kV1JobAnnotation)] = "{";
  EXPECT_FALSE(SetWorkerCwds(req, mpi).ok());
}

TEST(SetWorkerCwds, ABadAnnotationIsRefused) {
  PlanRequest req;
  req.annotations["trainlet.io/working-dir"] = "everywhere";
  auto plans = TwoPlans();
  EXPECT_FALSE(SetWorkerCwds(req, plans).ok());
}

}  // namespace
}  // namespace trainlet::coordinator
