// DeleteGate (issue 19, "Delete of a job on a Lost node"): a deleting job whose rank was on a node
// that went Lost stays Terminating until that node registers again and reports the attempt gone,
// or until delete --force. Over JobController and the real SQLite store of controller_fixture.h;
// the registry's clock is passed in.
#include "coordinator/delete_gate.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "controller_fixture.h"
#include "coordinator/job_controller.h"

namespace trainlet::coordinator {
namespace {

using testing::ControllerFixture;
using ::testing::HasSubstr;
using testing::JobYaml;

constexpr auto kStarted = v1::WorkerEvent::KIND_STARTED;
constexpr auto kExited = v1::WorkerEvent::KIND_EXITED;

class DeleteGateTest : public ControllerFixture {
 protected:
  // n2 registers again (an agent that reports attempts), holding `held`.
  void ReRegisterN2(const std::vector<std::pair<std::string, uint32_t>>& held) {
    v1::NodeInfo info;
    info.set_name("n2");
    info.set_address("127.0.0.2");
    info.set_hostname("n2");
    info.set_slots(4);
    info.set_reports_attempts(true);
    for (const auto& [job, attempt] : held) {
      auto* a = info.add_attempts();
      a->set_job(job);
      a->set_attempt(attempt);
      a->set_plan_received(true);
    }
    ASSERT_TRUE(registry_.Register(info, "rid-n2", "key-n2", Clock::now(), kT0 + 20000).ok());
  }
  // The delete of hello after RunHelloThenLoseN2, its n1 ranks then reporting their exit.
  void DeleteAndStopN1(bool force = false) {
    ASSERT_TRUE(controller_->Delete("hello", kT0 + 11000, "", force).ok());
    if (controller_->Find("hello") == nullptr) return;
    Report("hello", 0, kExited, kT0 + 11100, 0, 15);
    Report("hello", 1, kExited, kT0 + 11100, 0, 15);
  }
};

TEST_F(DeleteGateTest, ADeleteWaitsForTheLostNodeToConfirmItsRanksStopped) {
  RunHelloThenLoseN2();
  if (HasFatalFailure()) return;
  DeleteAndStopN1();
  // Today's main removed it here, its n2 ranks maybe still running.
  ASSERT_NE(controller_->Find("hello"), nullptr) << "deleted while n2's ranks may run";
  const v1::JobStatus& st = JobOrDie("hello");
  EXPECT_TRUE(st.deleting());
  ASSERT_GT(st.events_size(), 0);
  EXPECT_EQ(st.events(st.events_size() - 1).reason(), "DeleteWaitsForNode");
  EXPECT_THAT(st.events(st.events_size() - 1).message(), HasSubstr("node n2 (Lost)"));
  EXPECT_THAT(st.events(st.events_size() - 1).message(), HasSubstr("--force"));
  // Stored: a restarted coordinator keeps waiting.
  ASSERT_TRUE(controller_->Flush().ok());
  MakeController();
  controller_->Schedule(kT0 + 12000);
  ASSERT_NE(controller_->Find("hello"), nullptr);
  EXPECT_TRUE(JobOrDie("hello").deleting());

  // n2 comes back still holding the attempt (its ranks being stopped): still waiting.
  ReRegisterN2({{"hello", 1}});
  if (HasFatalFailure()) return;
  controller_->Schedule(kT0 + 20000);
  ASSERT_NE(controller_->Find("hello"), nullptr);
  // Its next beat holds it no longer: confirmed, the job goes.
  registry_.RecordAttempts("n2", {}, true, kT0 + 21000);
  controller_->Schedule(kT0 + 21000);
  EXPECT_EQ(controller_->Find("hello"), nullptr);
  EXPECT_TRUE(StoredNames().empty());
}

TEST_F(DeleteGateTest, ForceRemovesTheJobAtOnce) {
  RunHelloThenLoseN2();
  if (HasFatalFailure()) return;
  DeleteAndStopN1(/*force=*/false);
  ASSERT_NE(controller_->Find("hello"), nullptr);
  ASSERT_TRUE(controller_->Delete("hello", kT0 + 12000, "", /*force=*/true).ok());
  EXPECT_EQ(controller_->Find("hello"), nullptr);
  EXPECT_TRUE(StoredNames().empty());
}

TEST_F(DeleteGateTest, ForceDoesNotWaitForRunningRanksEither) {
  ApplyOk(JobYaml("hello", 2, 2));
  ReportAll("hello", kStarted, kT0 + 1);
  sink_.sent.clear();
  ASSERT_TRUE(controller_->Delete("hello", kT0 + 2, "", /*force=*/true).ok());
  EXPECT_EQ(controller_->Find("hello"), nullptr);
  EXPECT_EQ(sink_.StopNodes(), (std::vector<std::string>{"n1", "n2"}));  // still asked to stop
}

TEST(DeleteGate, DecidesFromRanksAndNodes) {
  NodeRegistry nodes{std::chrono::milliseconds(1000), std::chrono::milliseconds(3000)};
  v1::NodeInfo info;
  info.set_name("a");
  info.set_slots(1);
  ASSERT_TRUE(nodes.Register(info, "rid", "key", NodeRegistry::Clock::now(), 1).ok());
  DeleteGate gate(&nodes);
  v1::JobStatus st;
  st.set_attempt(2);
  auto* r = st.add_ranks();
  r->set_node("a");
  r->set_attempt(2);
  r->set_rank_state(v1::RANK_STATE_RUNNING);
  EXPECT_FALSE(gate.Decide("j", st).finish);  // a running rank
  EXPECT_TRUE(gate.Decide("j", st).waiting_for.empty());
  r->set_rank_state(v1::RANK_STATE_LOST);
  // An agent that does not report attempts confirms by being registered and not Lost.
  EXPECT_TRUE(gate.Decide("j", st).finish);
  nodes.RecordAttempts("a", {}, true, 2);
  EXPECT_TRUE(gate.Decide("j", st).finish);
  google::protobuf::RepeatedPtrField<v1::HeldAttempt> held;
  held.Add()->set_job("j");
  held.Mutable(0)->set_attempt(2);
  nodes.RecordAttempts("a", held, true, 3);
  EXPECT_FALSE(gate.Decide("j", st).finish);
  EXPECT_THAT(gate.Decide("j", st).waiting_for, HasSubstr("rank 0 on node a (Ready)"));
  r->set_node("gone");  // not registered at all
  EXPECT_THAT(gate.Decide("j", st).waiting_for, HasSubstr("node gone (not registered)"));
  gate.Force("j");
  EXPECT_TRUE(gate.Decide("j", st).finish);
  gate.Forget("j");
  EXPECT_FALSE(gate.Decide("j", st).finish);

  // One event per distinct wait.
  v1::JobStatus s2;
  EXPECT_TRUE(DeleteGate::NoteWaiting(s2, "x", 1));
  EXPECT_FALSE(DeleteGate::NoteWaiting(s2, "x", 2));
  EXPECT_TRUE(DeleteGate::NoteWaiting(s2, "y", 3));
  EXPECT_FALSE(DeleteGate::NoteWaiting(s2, "", 4));
  EXPECT_EQ(s2.events_size(), 2);
}

}  // namespace
}  // namespace trainlet::coordinator
