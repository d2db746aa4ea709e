#include "coordinator/stored_status.h"

#include <gtest/gtest.h>

namespace trainlet::coordinator {
namespace {

// A status as trainlet wrote it before the states were enums.
v1::JobStatus Old() {
  v1::JobStatus s;
  s.set_name("old");
  s.set_phase("Running");
  auto* r = s.add_ranks();
  r->set_rank(0);
  r->set_state("StartFailed");
  r = s.add_ranks();
  r->set_rank(1);
  r->set_state("Running");
  s.add_attempts()->set_result("Stopped");
  s.add_attempts()->set_result("");
  return s;
}

TEST(UpgradeStoredStatus, OldStringsBecomeEnumsAndAreCleared) {
  v1::JobStatus s = Old();
  ASSERT_TRUE(UpgradeStoredStatus(s).ok());
  EXPECT_EQ(s.job_phase(), v1::JOB_PHASE_RUNNING);
  EXPECT_EQ(s.ranks(0).rank_state(), v1::RANK_STATE_START_FAILED);
  EXPECT_EQ(s.ranks(1).rank_state(), v1::RANK_STATE_RUNNING);
  EXPECT_EQ(s.attempts(0).attempt_result(), v1::ATTEMPT_RESULT_STOPPED);
  EXPECT_EQ(s.attempts(1).attempt_result(), v1::ATTEMPT_RESULT_UNSPECIFIED);
  EXPECT_TRUE(s.phase().empty());
  EXPECT_TRUE(s.ranks(0).state().empty());
  EXPECT_TRUE(s.attempts(0).result().empty());
}

TEST(UpgradeStoredStatus, EveryOldSpellingIsRead) {
  for (const char* p :
       {"Pending", "Starting", "Running", "Restarting", "Succeeded", "Failed", "Suspended"}) {
    v1::JobStatus s;
    s.set_phase(p);
    ASSERT_TRUE(UpgradeStoredStatus(s).ok()) << p;
    EXPECT_NE(s.job_phase(), v1::JOB_PHASE_UNSPECIFIED) << p;
  }
  for (const char* st :
       {"Pending", "Running", "Succeeded", "Failed", "StartFailed", "Lost", "Stopped"}) {
    v1::JobStatus s;
    s.add_ranks()->set_state(st);
    ASSERT_TRUE(UpgradeStoredStatus(s).ok()) << st;
    EXPECT_NE(s.ranks(0).rank_state(), v1::RANK_STATE_UNSPECIFIED) << st;
  }
}

TEST(UpgradeStoredStatus, NewRecordsPassUnchanged) {
  v1::JobStatus s;
  s.set_job_phase(v1::JOB_PHASE_SUSPENDED);
  s.add_ranks()->set_rank_state(v1::RANK_STATE_LOST);
  s.add_attempts()->set_attempt_result(v1::ATTEMPT_RESULT_FAILED);
  const std::string before = s.SerializeAsString();
  ASSERT_TRUE(UpgradeStoredStatus(s).ok());
  EXPECT_EQ(s.SerializeAsString(), before);
}

TEST(UpgradeStoredStatus, UnsetPhaseIsAJobJustCreated) {
  v1::JobStatus s;
  ASSERT_TRUE(UpgradeStoredStatus(s).ok());
  EXPECT_EQ(s.job_phase(), v1::JOB_PHASE_UNSPECIFIED);
}

void ExpectInvalid(v1::JobStatus s, const std::string& names) {
  Status st = UpgradeStoredStatus(s);
  EXPECT_EQ(st.code(), ErrorCode::kInvalid) << names;
  EXPECT_NE(st.message().find(names), std::string::npos) << st.message();
}

TEST(UpgradeStoredStatus, CorruptOrUnknownValuesAreErrorsNotPending) {
  v1::JobStatus s = Old();
  s.set_phase("Exploded");
  ExpectInvalid(s, "\"Exploded\"");

  s = Old();
  s.set_phase("running");  // the spelling is exact
  ExpectInvalid(s, "\"running\"");

  s = Old();
  s.mutable_ranks(1)->set_state("Zombie");
  ExpectInvalid(s, "rank 1: unknown state \"Zombie\"");

  s = Old();
  s.mutable_ranks(1)->clear_state();  // a rank always had a state
  ExpectInvalid(s, "rank 1: unknown state \"\"");

  s = Old();
  s.mutable_attempts(0)->set_result("Aborted");
  ExpectInvalid(s, "\"Aborted\"");

  // Enum values a newer trainlet may write.
  s = Old();
  s.set_job_phase(static_cast<v1::JobPhase>(99));
  ExpectInvalid(s, "job_phase: unknown value 99");
  s = Old();
  s.mutable_ranks(0)->set_rank_state(static_cast<v1::RankState>(77));
  ExpectInvalid(s, "rank 0: unknown rank_state 77");
  s = Old();
  s.mutable_attempts(1)->set_attempt_result(static_cast<v1::AttemptResult>(9));
  ExpectInvalid(s, "unknown attempt_result 9");
}

}  // namespace
}  // namespace trainlet::coordinator
