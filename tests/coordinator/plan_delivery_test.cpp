// PlanDelivery (coordinator/plan_delivery.h): which nodes miss the plan of a live attempt, from
// what their agents report holding, and when a resend is due.
#include "coordinator/plan_delivery.h"

#include <gtest/gtest.h>

#include <chrono>

namespace trainlet::coordinator {
namespace {

using namespace std::chrono_literals;

constexpr int64_t kT0 = 1'700'000'000'000;

class PlanDeliveryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* n : {"n1", "n2"}) Register(n, /*reports=*/true, {});
    st_.set_name("job");
    st_.set_attempt(1);
    st_.set_job_phase(v1::JOB_PHASE_STARTING);
    st_.add_placement("n1");
    st_.add_placement("n2");
    for (int i = 0; i < 2; ++i) {
      auto* r = st_.add_ranks();
      r->set_rank(i);
      r->set_node(i == 0 ? "n1" : "n2");
      r->set_rank_state(v1::RANK_STATE_PENDING);
      r->set_attempt(1);
    }
  }

  void Register(const std::string& name, bool reports,
                const std::vector<std::pair<std::string, uint32_t>>& held, int64_t at = kT0) {
    v1::NodeInfo info;
    info.set_name(name);
    info.set_reports_attempts(reports);
    for (const auto& [job, attempt] : held) {
      auto* a = info.add_attempts();
      a->set_job(job);
      a->set_attempt(attempt);
      a->set_plan_received(true);
    }
    ASSERT_TRUE(registry_.Register(info, "rid-" + name, "key-" + name, now_, at).ok());
  }
  void Beat(const std::string& name, const std::vector<std::pair<std::string, uint32_t>>& held,
            int64_t at, bool plan_received = true) {
    google::protobuf::RepeatedPtrField<v1::HeldAttempt> attempts;
    for (const auto& [job, attempt] : held) {
      auto* a = attempts.Add();
      a->set_job(job);
      a->set_attempt(attempt);
      a->set_plan_received(plan_received);
    }
    registry_.RecordAttempts(name, attempts, true, at);
  }
  v1::LaunchPlan Plan(uint32_t attempt = 1) {
    v1::LaunchPlan p;
    p.set_job("job");
    p.set_attempt(attempt);
    return p;
  }

  NodeRegistry registry_{1000ms, 3000ms};
  std::chrono::steady_clock::time_point now_ = std::chrono::steady_clock::now();
  v1::JobStatus st_;
  PlanDelivery delivery_;
};

TEST_F(PlanDeliveryTest, ANodeThatNeverGotAPlanThisCoordinatorNeverSentMissesIt) {
  // A coordinator that restarted: no send known, and both nodes registered holding nothing.
  EXPECT_EQ(delivery_.Missing(st_, registry_, kT0), (std::vector<std::string>{"n1", "n2"}));
  EXPECT_FALSE(delivery_.Reached(st_, "n1", registry_));
  Register("n2", true, {{"job", 1}});
  EXPECT_EQ(delivery_.Missing(st_, registry_, kT0), std::vector<std::string>{"n1"});
  EXPECT_TRUE(delivery_.Reached(st_, "n2", registry_));
}

TEST_F(PlanDeliveryTest, AReportTooSoonAfterTheSendSaysNothing) {
  delivery_.Sent("n1", Plan(), kT0 + 100);
  delivery_.Sent("n2", Plan(), kT0 + 100);
  Beat("n1", {}, kT0 + 1000);
  Beat("n2", {}, kT0 + 1000);
  EXPECT_TRUE(delivery_.Missing(st_, registry_, kT0 + 1000).empty());
  EXPECT_TRUE(delivery_.Reached(st_, "n1", registry_));
  // Well after the send, n1 still holds nothing; n2 holds it.
  Beat("n1", {}, kT0 + 100 + PlanDelivery::kAckWaitMs);
  Beat("n2", {{"job", 1}}, kT0 + 100 + PlanDelivery::kAckWaitMs);
  EXPECT_TRUE(delivery_.Missing(st_, registry_, kT0 + 3200).empty()) << "resend interval";
  EXPECT_EQ(delivery_.Missing(st_, registry_, kT0 + 100 + PlanDelivery::kResendIntervalMs),
            std::vector<std::string>{"n1"});
  EXPECT_FALSE(delivery_.Reached(st_, "n1", registry_));
  ASSERT_NE(delivery_.Plan("job", 1, "n1"), nullptr);
  EXPECT_EQ(delivery_.Plan("job", 2, "n1"), nullptr);
}

TEST_F(PlanDeliveryTest, PortsAloneAreNotThePlan) {
  Beat("n1", {{"job", 1}}, kT0, /*plan_received=*/false);
  EXPECT_FALSE(delivery_.Reached(st_, "n1", registry_));
}

TEST_F(PlanDeliveryTest, ARankHeardFromOrAnAgentThatDoesNotReportIsNeverResent) {
  st_.mutable_ranks(0)->set_rank_state(v1::RANK_STATE_RUNNING);
  Register("n2", /*reports=*/false, {});
  EXPECT_TRUE(delivery_.Missing(st_, registry_, kT0).empty());
  EXPECT_TRUE(delivery_.Reached(st_, "n2", registry_));  // nothing known: as before
}

TEST_F(PlanDeliveryTest, OnlyALiveAttemptMissesAnything) {
  st_.set_job_phase(v1::JOB_PHASE_RESTARTING);
  EXPECT_TRUE(delivery_.Missing(st_, registry_, kT0).empty());
  st_.set_job_phase(v1::JOB_PHASE_STARTING);
  st_.set_deleting(true);
  EXPECT_TRUE(delivery_.Missing(st_, registry_, kT0).empty());
}

TEST_F(PlanDeliveryTest, ANewerAttemptDropsTheOlderPlansAndForgetDropsAll) {
  delivery_.Sent("n1", Plan(1), kT0);
  delivery_.Sent("n1", Plan(2), kT0);
  EXPECT_EQ(delivery_.Plan("job", 1, "n1"), nullptr);
  ASSERT_NE(delivery_.Plan("job", 2, "n1"), nullptr);
  delivery_.Forget("job");
  EXPECT_EQ(delivery_.Plan("job", 2, "n1"), nullptr);
}

// A ReservePorts lost while the node stays connected: its reports never hold the attempt.
TEST_F(PlanDeliveryTest, AnAskThatNeverArrivedIsLost) {
  delivery_.Tried("job", 1, "n1", kT0);
  delivery_.Tried("job", 1, "n2", kT0);
  Beat("n1", {}, kT0 + 1000);
  EXPECT_FALSE(delivery_.AskLost(st_, "n1", registry_, kT0 + 6000)) << "a report too early";
  Beat("n1", {}, kT0 + PlanDelivery::kAckWaitMs);
  Beat("n2", {{"job", 1}}, kT0 + PlanDelivery::kAckWaitMs, /*plan_received=*/false);
  EXPECT_FALSE(delivery_.AskLost(st_, "n1", registry_, kT0 + 4000)) << "resend interval";
  EXPECT_TRUE(delivery_.AskLost(st_, "n1", registry_, kT0 + PlanDelivery::kResendIntervalMs));
  EXPECT_FALSE(delivery_.AskLost(st_, "n2", registry_, kT0 + PlanDelivery::kResendIntervalMs))
      << "n2 holds its ports";
}

TEST_F(PlanDeliveryTest, AnUnregisteredOrLostNodeNeverReachedIt) {
  EXPECT_FALSE(delivery_.Reached(st_, "n9", registry_));
  EXPECT_TRUE(delivery_.Missing(st_, registry_, kT0).size() == 2u);
}

}  // namespace
}  // namespace trainlet::coordinator
