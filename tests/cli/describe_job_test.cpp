// describe trainjob: the Placement table's working directory per node, from its ranks' Started
// events (issue 18, "Working directory"); the Attempts table's infrastructure failures (issue 19,
// defect 4).
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

}  // namespace
}  // namespace trainlet::cli
