// UsageByClusterQueue and CurrentUsage: what `get clusterqueues` shows.
#include "coordinator/admission_usage.h"

#include <gtest/gtest.h>

#include "tests/coordinator/admission_fixture.h"

namespace trainlet::coordinator::admission {
namespace {

using namespace fixture;  // NOLINT: the builders of admission_fixture.h

TEST(AdmissionUsage, CountsAdmittedPendingAndUsagePerFlavor) {
  AdmissionInputs in = WithDefaultFlavor();
  AddQueue(in, GpuQueue("team-a", 4, "research", 2));
  AddQueue(in, GpuQueue("team-b", 8, "research"));
  in.config.default_local_queue = "q";
  in.workloads.push_back(Running(Job("team-a", "r1", 3)));
  in.workloads.push_back(Running(Job("team-a", "r2", 3)));
  in.workloads.push_back(Job("team-a", "p1", 1));
  Workload unlabelled = Job("team-b", "p2", 1);
  unlabelled.local_queue.clear();
  in.workloads.push_back(unlabelled);
  in.workloads.push_back(Job("team-c", "nowhere", 1));
  const auto usage = UsageByClusterQueue(in);
  ASSERT_EQ(usage.size(), 2u);
  EXPECT_EQ(usage[0].name, "team-a");
  EXPECT_EQ(usage[0].cohort, "research");
  EXPECT_EQ(usage[0].admitted, 2);
  EXPECT_EQ(usage[0].pending, 1);
  ASSERT_EQ(usage[0].usage.size(), 1u);
  EXPECT_EQ(usage[0].usage[0].flavor, "default");
  EXPECT_EQ(usage[0].usage[0].used, 6);
  EXPECT_EQ(usage[0].usage[0].borrowed, 2);
  EXPECT_EQ(usage[0].usage[0].borrowing_limit, 2);
  EXPECT_EQ(usage[1].pending, 1);
  EXPECT_EQ(usage[1].usage[0].used, 0);
  const auto current = CurrentUsage(usage);
  EXPECT_EQ(current.at("team-a").at(kGpu), 6);
  EXPECT_EQ(current.at("team-b").at(kGpu), 0);
}

}  // namespace
}  // namespace trainlet::coordinator::admission
