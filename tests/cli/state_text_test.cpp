#include "trainletctl/state_text.h"

#include <gtest/gtest.h>

namespace trainlet::cli {
namespace {

TEST(StateText, ShowsTheWordsTheTablesAlwaysShowed) {
  v1::JobStatus j;
  EXPECT_EQ(PhaseText(j), "Pending");  // a job just created
  j.set_job_phase(v1::JOB_PHASE_RESTARTING);
  EXPECT_EQ(PhaseText(j), "Restarting");
  j.set_job_phase(v1::JOB_PHASE_SUSPENDED);
  EXPECT_EQ(PhaseText(j), "Suspended");

  v1::RankStatus r;
  r.set_rank_state(v1::RANK_STATE_START_FAILED);
  EXPECT_EQ(StateText(r), "StartFailed");
  r.set_rank_state(v1::RANK_STATE_STOPPED);
  EXPECT_EQ(StateText(r), "Stopped");

  v1::AttemptRecord a;
  EXPECT_EQ(ResultText(a), "Running");
  a.set_attempt_result(v1::ATTEMPT_RESULT_FAILED);
  EXPECT_EQ(ResultText(a), "Failed");

  v1::SuspendJobResult s;
  s.set_job_phase(v1::JOB_PHASE_SUSPENDED);
  EXPECT_EQ(PhaseText(s), "Suspended");
}

TEST(StateText, AnOlderCoordinatorsStringsAreShownAsTheyAre) {
  v1::JobStatus j;
  j.set_phase("Running");
  EXPECT_EQ(PhaseText(j), "Running");
  v1::RankStatus r;
  r.set_state("Lost");
  EXPECT_EQ(StateText(r), "Lost");
  v1::AttemptRecord a;
  a.set_result("Stopped");
  EXPECT_EQ(ResultText(a), "Stopped");
}

TEST(StateText, ValuesFromANewerCoordinatorAreMarkedUnknown) {
  v1::JobStatus j;
  j.set_job_phase(static_cast<v1::JobPhase>(40));
  EXPECT_EQ(PhaseText(j), "Unknown(40)");
  v1::RankStatus r;
  r.set_rank_state(static_cast<v1::RankState>(41));
  EXPECT_EQ(StateText(r), "Unknown(41)");
}

TEST(FillStateStrings, OldJsonKeysKeepTheirOldValues) {
  v1::JobList list;
  v1::JobStatus& j = *list.add_jobs();
  j.set_job_phase(v1::JOB_PHASE_RUNNING);
  j.add_ranks()->set_rank_state(v1::RANK_STATE_RUNNING);
  j.add_ranks()->set_rank_state(v1::RANK_STATE_STOPPED);
  j.add_attempts()->set_attempt_result(v1::ATTEMPT_RESULT_FAILED);
  j.add_attempts();  // still running: result "" as before
  FillStateStrings(list);
  EXPECT_EQ(j.phase(), "Running");
  EXPECT_EQ(j.ranks(0).state(), "Running");
  EXPECT_EQ(j.ranks(1).state(), "Stopped");
  EXPECT_EQ(j.attempts(0).result(), "Failed");
  EXPECT_EQ(j.attempts(1).result(), "");
  // The enums stay: -o json shows both.
  EXPECT_EQ(j.job_phase(), v1::JOB_PHASE_RUNNING);
}

}  // namespace
}  // namespace trainlet::cli
