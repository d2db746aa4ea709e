// describe trainjob: the Placement table's working directory per node, from its ranks' Started
// events (issue 18, "Working directory"); the Attempts table's infrastructure failures (issue 19,
// defect 4); the ResourceFlavor a job was admitted to (issue 14).
#include <gtest/gtest.h>

#include "trainletctl/render.h"

namespace trainlet::cli {
namespace {

constexpr int64_t kNow = 1'795'000'000'000;

TEST(DescribeJob, PlacementShowsEachNodesWorkingDir) {
  v1::JobStatus j;
  j.set_name("train");
  j.set_attempt(1);
  j.add_placement("node-a");
  j.add_placement("node-b");
  j.add_placement("node-c");
  for (int i = 0; i < 3; ++i) {
    auto* r = j.add_ranks();
    r->set_rank(i);
    r->set_node(i < 2 ? "node-a" : "node-b");
    if (i < 2) r->set_cwd("/mnt/shared/train");
    if (i == 2) r->set_cwd("/var/lib/trainlet/work/train");
  }
  const std::string text = DescribeJob(j, kNow);
  EXPECT_NE(text.find("WORKING-DIR"), std::string::npos) << text;
  EXPECT_NE(text.find("node-a   /mnt/shared/train\n"), std::string::npos) << text;
  EXPECT_NE(text.find("node-b   /var/lib/trainlet/work/train\n"), std::string::npos) << text;
  EXPECT_NE(text.find("node-c   -\n"), std::string::npos) << text;  // no rank started there
}

TEST(DescribeJob, AttemptsFailedForTheInfrastructureSayTheyAreNotCounted) {
  v1::JobStatus j;
  j.set_name("train");
  j.set_attempt(2);
  auto* lost = j.add_attempts();
  lost->set_attempt(1);
  lost->set_attempt_result(v1::ATTEMPT_RESULT_FAILED);
  lost->set_cause("node node-b lost");
  lost->set_infrastructure(true);
  auto* failed = j.add_attempts();
  failed->set_attempt(2);
  failed->set_attempt_result(v1::ATTEMPT_RESULT_FAILED);
  failed->set_cause("rank 1 on node-a exited with code 1");
  const std::string text = DescribeJob(j, kNow);
  EXPECT_NE(text.find("Failed (not counted)"), std::string::npos) << text;
  EXPECT_EQ(text.find("(not counted)"), text.rfind("(not counted)")) << text;  // attempt 1 only
}

// Issue 14: a job admitted to a ResourceFlavor shows it, once however many resources it covers.
TEST(DescribeJob, ShowsTheFlavorItWasAdmittedTo) {
  v1::JobStatus j;
  j.set_name("train");
  j.set_queue("lq");
  j.set_cluster_queue("research");
  auto* a = j.mutable_admission();
  a->set_cluster_queue("research");
  a->set_unix_ms(kNow - 5000);
  for (const char* resource : {"cpu", "nvidia.com/gpu"}) {
    auto* r = a->add_resources();
    r->set_resource(resource);
    r->set_flavor("a100");
    r->set_amount(1);
  }
  const std::string text = DescribeJob(j, kNow);
  EXPECT_NE(text.find("Flavor:"), std::string::npos) << text;
  EXPECT_NE(text.find("a100 (placed on its nodes only)"), std::string::npos) << text;
  a->set_unmanaged(true);  // admitted without a queue: no flavor line
  a->clear_resources();
  EXPECT_EQ(DescribeJob(j, kNow).find("Flavor:"), std::string::npos);
}

}  // namespace
}  // namespace trainlet::cli
