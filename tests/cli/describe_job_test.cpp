// describe trainjob's Placement table: each node's working directory, from its ranks' Started
// events (issue 18, "Working directory").
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

}  // namespace
}  // namespace trainlet::cli
