// describe's Steps table (cli/trainletctl/render.cpp, DescribeSteps): each replicated job on each
// node with its workers' state.

#include <gtest/gtest.h>

#include "trainletctl/render.h"

namespace trainlet::cli {
namespace {

void Add(v1::JobStatus& j, const std::string& node, const std::string& step, v1::RankState s) {
  auto* r = j.add_ranks();
  r->set_rank(static_cast<uint32_t>(j.ranks_size() - 1));
  r->set_node(node);
  r->set_step(step);
  r->set_rank_state(s);
}

TEST(DescribeStepsTest, EachStepOnEachNodeWithItsState) {
  v1::JobStatus j;
  j.set_attempt(1);
  j.add_placement("node-a");
  j.add_placement("node-b");
  Add(j, "node-a", "", v1::RANK_STATE_PENDING);
  Add(j, "node-b", "", v1::RANK_STATE_RUNNING);
  Add(j, "node-a", "dataset-initializer", v1::RANK_STATE_RUNNING);
  Add(j, "node-a", "dataset-initializer", v1::RANK_STATE_SUCCEEDED);
  Add(j, "node-b", "dataset-initializer", v1::RANK_STATE_SUCCEEDED);
  Add(j, "node-a", "model-initializer", v1::RANK_STATE_FAILED);
  Add(j, "node-b", "model-initializer", v1::RANK_STATE_PENDING);
  const std::string out = DescribeSteps(j);
  EXPECT_EQ(out,
            "Steps (attempt 1):\n"
            "  STEP                  NODE     WORKERS   STATE\n"
            "  node                  node-a   1         Pending\n"
            "  node                  node-b   1         Running\n"
            "  dataset-initializer   node-a   2         Running\n"
            "  dataset-initializer   node-b   1         Complete\n"
            "  model-initializer     node-a   1         Failed\n"
            "  model-initializer     node-b   1         Pending\n")
      << out;
}

// Issue 18: each step's workers run in their own container's workingDir; describe shows where,
// per step and node.
TEST(DescribeStepsTest, EachStepShowsItsWorkingDirOnEachNode) {
  v1::JobStatus j;
  j.set_attempt(1);
  j.add_placement("node-a");
  Add(j, "node-a", "", v1::RANK_STATE_RUNNING);
  j.mutable_ranks(0)->set_cwd("/nfs/j/train");
  Add(j, "node-a", "dataset-initializer", v1::RANK_STATE_SUCCEEDED);
  j.mutable_ranks(1)->set_cwd("/nfs/j/prep");
  Add(j, "node-a", "model-initializer", v1::RANK_STATE_PENDING);
  const std::string out = DescribeSteps(j);
  EXPECT_EQ(out,
            "Steps (attempt 1):\n"
            "  STEP                  NODE     WORKERS   STATE      WORKING-DIR\n"
            "  node                  node-a   1         Running    /nfs/j/train\n"
            "  dataset-initializer   node-a   1         Complete   /nfs/j/prep\n"
            "  model-initializer     node-a   1         Pending    -\n")
      << out;
}

TEST(DescribeStepsTest, NothingForAJobWithoutSteps) {
  v1::JobStatus j;
  j.add_placement("node-a");
  Add(j, "node-a", "", v1::RANK_STATE_RUNNING);
  EXPECT_EQ(DescribeSteps(j), "");
}

}  // namespace
}  // namespace trainlet::cli
