// Which worker's log a `logs` request reads: the current attempt's, or an earlier attempt's as it
// was numbered then (issue 18: `logs --step S --attempt N`).

#include "coordinator/log_target.h"

#include <gtest/gtest.h>

namespace trainlet::coordinator {
namespace {

void AddRank(v1::JobStatus& st, uint32_t rank, const std::string& node, const std::string& step,
             v1::RankState state = v1::RANK_STATE_RUNNING) {
  auto* r = st.add_ranks();
  r->set_rank(rank);
  r->set_node(node);
  r->set_step(step);
  r->set_rank_state(state);
  r->set_attempt(st.attempt());
}

void AddStep(v1::JobStatus& st, uint32_t attempt, const std::string& step, uint32_t first,
             uint32_t count) {
  auto* s = st.add_attempt_steps();
  s->set_attempt(attempt);
  s->set_step(step);
  s->set_first_rank(first);
  s->set_count(count);
}

// Attempt 1 ran a main world of 2 on n1 (ranks 0-1) and the initializer as rank 2; attempt 2 runs
// a main world of 4 on n2 (ranks 0-3) and the initializer as rank 4 (numProcPerNode: auto on a
// bigger node).
v1::JobStatus TwoShapes() {
  v1::JobStatus st;
  st.set_attempt(2);
  auto* a1 = st.add_attempts();
  a1->set_attempt(1);
  for (const char* n : {"n1", "n1", "n1"}) a1->add_rank_nodes(n);
  auto* a2 = st.add_attempts();
  a2->set_attempt(2);
  for (const char* n : {"n2", "n2", "n2", "n2", "n2"}) a2->add_rank_nodes(n);
  AddStep(st, 1, "init", 2, 1);
  AddStep(st, 2, "init", 4, 1);
  for (uint32_t r = 0; r < 4; ++r) AddRank(st, r, "n2", "");
  AddRank(st, 4, "n2", "init", v1::RANK_STATE_SUCCEEDED);
  return st;
}

v1::LogsRequest Req(uint32_t rank, const std::string& step, uint32_t attempt) {
  v1::LogsRequest req;
  req.set_rank(rank);
  req.set_step(step);
  req.set_attempt(attempt);
  return req;
}

TEST(LogTargetTest, AStepOfAnEarlierAttemptIsReadAsThatAttemptNumberedIt) {
  const v1::JobStatus st = TwoShapes();
  auto t = ResolveLogTarget(st, Req(0, "init", 1), "j");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->rank, 2u);  // not 4, the current attempt's number
  EXPECT_EQ(t->attempt, 1u);
  EXPECT_EQ(t->node, "n1");
  EXPECT_TRUE(t->done);

  auto now = ResolveLogTarget(st, Req(0, "init", 0), "j");
  ASSERT_TRUE(now.ok()) << now.status().ToString();
  EXPECT_EQ(now->rank, 4u);
  EXPECT_EQ(now->attempt, 2u);
  EXPECT_EQ(now->node, "n2");
  EXPECT_TRUE(now->done);  // it exited 0
}

TEST(LogTargetTest, AGlobalRankOfAnEarlierAttemptNeedNotExistNow) {
  v1::JobStatus st = TwoShapes();
  // Attempt 1 had ranks 0-2 only; rank 2 then was the initializer.
  auto t = ResolveLogTarget(st, Req(2, "", 1), "j");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->node, "n1");
  auto gone = ResolveLogTarget(st, Req(3, "", 1), "j");
  ASSERT_FALSE(gone.ok());
  EXPECT_EQ(gone.status().message(), "--rank 3 (attempt 1): trainjob/j has ranks 0-2");
  // The main world of attempt 1 was 2: its index 2 is no main rank.
  EXPECT_EQ(AttemptStepWorkerRank(st, "", 1, 1), 1u);
  EXPECT_EQ(AttemptStepWorkerRank(st, "", 2, 1), std::nullopt);
}

TEST(LogTargetTest, AnAttemptThatDoesNotExistIsRefusedListingThoseThatDo) {
  const v1::JobStatus st = TwoShapes();
  auto t = ResolveLogTarget(st, Req(0, "init", 7), "team/j");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(t.status().message(), "--attempt 7: trainjob/team/j has attempts 1-2");

  auto w = ResolveLogTarget(st, Req(1, "init", 1), "j");
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().message(),
            "--step init --rank 1 (attempt 1): trainjob/j has no such worker of that replicated "
            "job (its workers: 0-0)");
}

TEST(LogTargetTest, AttemptNumbersSayWhichExist) {
  v1::JobStatus st;
  EXPECT_EQ(AttemptNumbers(st), "none");
  st.add_attempts()->set_attempt(1);
  EXPECT_EQ(AttemptNumbers(st), "1");
  st.add_attempts()->set_attempt(3);
  st.add_attempts()->set_attempt(4);
  EXPECT_EQ(AttemptNumbers(st), "1, 3, 4");
}

// Attempts placed before attempt_steps was recorded read with the current numbering, as before.
TEST(LogTargetTest, UnrecordedAttemptsUseTheCurrentNumbering) {
  v1::JobStatus st = TwoShapes();
  st.clear_attempt_steps();
  st.mutable_attempts(0)->add_rank_nodes("n1");
  st.mutable_attempts(0)->add_rank_nodes("n3");
  auto t = ResolveLogTarget(st, Req(0, "init", 1), "j");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->rank, 4u);
  EXPECT_EQ(t->node, "n3");
}

}  // namespace
}  // namespace trainlet::coordinator
