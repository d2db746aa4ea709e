// The workers `trainletctl logs JOB` reads without --rank: the current attempt's, or an earlier
// attempt's as it ran (issue 18: `logs --attempt N`, `--previous`).

#include "trainletctl/log_workers.h"

#include <gtest/gtest.h>

namespace trainlet::cli {
namespace {

std::vector<std::string> Labels(const Result<std::vector<LogWorker>>& w) {
  std::vector<std::string> out;
  if (!w.ok()) return {"error: " + w.status().message()};
  for (const auto& x : *w) out.push_back(std::to_string(x.rank) + " " + x.label);
  return out;
}

// Attempt 1: a main world of 2 and the initializer as rank 2; attempt 2 (current): a main world
// of 4 and the initializer as rank 4.
v1::JobStatus TwoShapes() {
  v1::JobStatus j;
  j.set_name("j");
  j.set_attempt(2);
  auto* a1 = j.add_attempts();
  a1->set_attempt(1);
  for (int i = 0; i < 3; ++i) a1->add_rank_nodes("n1");
  auto* a2 = j.add_attempts();
  a2->set_attempt(2);
  for (int i = 0; i < 5; ++i) a2->add_rank_nodes("n2");
  for (uint32_t a : {1u, 2u}) {
    auto* s = j.add_attempt_steps();
    s->set_attempt(a);
    s->set_step("init");
    s->set_first_rank(a == 1 ? 2 : 4);
    s->set_count(1);
  }
  for (uint32_t r = 0; r < 5; ++r) {
    auto* rank = j.add_ranks();
    rank->set_rank(r);
    if (r == 4) rank->set_step("init");
  }
  return j;
}

TEST(LogWorkersTest, AnEarlierAttemptIsListedAsItRan) {
  const v1::JobStatus j = TwoShapes();
  EXPECT_EQ(Labels(LogWorkers(j, 1, "")),
            (std::vector<std::string>{"0 rank 0", "1 rank 1", "2 init 0"}));
  EXPECT_EQ(Labels(LogWorkers(j, 1, "init")), (std::vector<std::string>{"2 init 0"}));
  EXPECT_EQ(Labels(LogWorkers(j, 0, "init")), (std::vector<std::string>{"4 init 0"}));
  EXPECT_EQ(Labels(LogWorkers(j, 2, "")).size(), 5u);
  EXPECT_EQ(Labels(LogWorkers(j, 1, "other")),
            (std::vector<std::string>{"error: trainjob/j has no workers of step other"}));
}

TEST(LogWorkersTest, PreviousIsTheAttemptBeforeTheCurrent) {
  v1::JobStatus j = TwoShapes();
  auto p = PreviousAttempt(j, "team/j");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(*p, 1u);
  j.set_attempt(1);
  p = PreviousAttempt(j, "team/j");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().message(), "--previous: trainjob/team/j has only attempt 1");
}

}  // namespace
}  // namespace trainlet::cli
