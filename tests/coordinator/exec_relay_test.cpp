// ExecRelay's dedup rule for one output stream (ExecRelay::TrimRelayed): output a restarted agent
// resends from the last acknowledged offset reaches trainlet-exec once, in order. And what a
// restarted coordinator's relay does with the sessions agents report: takes back those of an
// earlier process, holds their output, and re-attaches only the job's own launcher to them.
#include "coordinator/exec_relay.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "common/curve_keys.h"
#include "controller_fixture.h"

namespace trainlet::coordinator {
namespace {

TEST(ExecRelayTrim, NewBytesPassAndAdvanceTheCount) {
  uint64_t relayed = 0;
  std::string data = "hello";
  EXPECT_TRUE(ExecRelay::TrimRelayed(0, &data, &relayed));
  EXPECT_EQ(data, "hello");
  EXPECT_EQ(relayed, 5u);
  data = " world";
  EXPECT_TRUE(ExecRelay::TrimRelayed(5, &data, &relayed));
  EXPECT_EQ(data, " world");
  EXPECT_EQ(relayed, 11u);
}

TEST(ExecRelayTrim, AResendIsDroppedAndAnOverlapCut) {
  uint64_t relayed = 11;  // "hello world" went out before the agent was killed
  std::string again = "hello";
  EXPECT_FALSE(ExecRelay::TrimRelayed(0, &again, &relayed));
  EXPECT_EQ(relayed, 11u);
  std::string tail = "world";  // bytes 6..10: all relayed
  EXPECT_FALSE(ExecRelay::TrimRelayed(6, &tail, &relayed));
  // The restarted agent resends from its acknowledged offset 8: "rld" is old, "!\n" new.
  std::string overlap = "rld!\n";
  EXPECT_TRUE(ExecRelay::TrimRelayed(8, &overlap, &relayed));
  EXPECT_EQ(overlap, "!\n");
  EXPECT_EQ(relayed, 13u);
  std::string empty;
  EXPECT_FALSE(ExecRelay::TrimRelayed(13, &empty, &relayed));
}

TEST(ExecRelayTrim, BytesAfterAGapStillPass) {
  uint64_t relayed = 4;
  std::string data = "later";
  EXPECT_TRUE(ExecRelay::TrimRelayed(10, &data, &relayed));
  EXPECT_EQ(data, "later");
  EXPECT_EQ(relayed, 15u);
}

// An MPI job running on n1..n3, and a relay as a coordinator that just restarted has it.
class ExecRelayRestartTest : public testing::ControllerFixture {
 protected:
  void SetUp() override {
    ControllerFixture::SetUp();
    options_.exec_endpoint = "tcp://127.0.0.1:1";  // the mpi runtime needs one to plan
    auto server = GenerateCurveKeyPair();
    ASSERT_TRUE(server.ok());
    options_.server_public_key = server->public_z85;
    MakeController();
    ApplyOk(testing::JobYaml("mpi", 3, 1, "mpi-distributed"));
    ReportAll("mpi", v1::WorkerEvent::KIND_STARTED, kT0 + 10);
    for (const auto& [key, job] : controller_->exec().LauncherKeys()) {
      if (job == "mpi") launcher_key_ = key;
    }
    ASSERT_FALSE(launcher_key_.empty());
    relay_ = std::make_unique<ExecRelay>(controller_.get(), &sink_,
                                         [this](const std::string& rid, v1::Envelope env) {
                                           replies_.emplace_back(rid, std::move(env));
                                         });
  }

  static v1::ExecSessionReport Report(uint64_t id, uint32_t attempt, uint64_t out) {
    v1::ExecSessionReport r;
    r.set_exec_id(id);
    r.set_job("mpi");
    r.set_attempt(attempt);
    r.set_stdout_bytes(out);
    return r;
  }
  static v1::Envelope Output(uint64_t id, uint64_t offset, const std::string& data) {
    v1::Envelope env;
    env.mutable_exec_output()->set_exec_id(id);
    env.mutable_exec_output()->set_stream(1);
    env.mutable_exec_output()->set_offset(offset);
    env.mutable_exec_output()->set_data(data);
    return env;
  }
  static RouterMessage Keepalive(const std::string& rid, const std::string& key, uint64_t client,
                                 uint64_t session) {
    RouterMessage m;
    m.routing_id = rid;
    m.user_id = key;
    m.envelope.mutable_exec_keepalive()->set_exec_id(client);
    m.envelope.mutable_exec_keepalive()->set_session_id(session);
    return m;
  }

  std::string launcher_key_;
  std::unique_ptr<ExecRelay> relay_;
  std::vector<std::pair<std::string, v1::Envelope>> replies_;
};

TEST_F(ExecRelayRestartTest, TakesBackHoldsOutputAndReattachesOnlyTheLauncher) {
  const auto now = ExecRelay::Clock::now();
  google::protobuf::RepeatedPtrField<v1::ExecSessionReport> reports;
  *reports.Add() = Report(5, 1, 10);              // an earlier process's session: taken back
  *reports.Add() = Report(UINT64_MAX - 1, 1, 0);  // "ours" and unknown: this process ended it
  *reports.Add() = Report(6, 2, 0);               // of an attempt that is not running
  relay_->AdoptSessions("n2", reports, now);
  EXPECT_EQ(relay_->sessions(), 1u);
  v1::HeartbeatAck ack;
  relay_->AddDelivered("n2", &ack);
  ASSERT_EQ(ack.exec_sessions_size(), 1);
  EXPECT_EQ(ack.exec_sessions(0).exec_id(), 5u);
  EXPECT_EQ(ack.exec_sessions(0).stdout_bytes(), 10u);  // so the agent keeps it, and resends

  // The agent resends from byte 8: bytes 8..9 were relayed before the restart. Nobody is
  // attached yet: held.
  relay_->OnAgentMessage("n2", Output(5, 8, "xyabc"));
  relay_->OnAgentMessage("n3", Output(5, 13, "not n3's"));  // another node's id: ignored
  EXPECT_TRUE(replies_.empty());

  // A client with another key cannot take it over.
  relay_->OnClientMessage(Keepalive("intruder", "some-other-key", 77, 5), now);
  EXPECT_TRUE(replies_.empty());

  // The launcher re-attaches: the held output first, under its own id and with its offset
  // (trainlet-exec drops what it wrote already), then the echo naming the session.
  relay_->OnClientMessage(Keepalive("rid-exec", launcher_key_, 77, 5), now);
  ASSERT_EQ(replies_.size(), 2u);
  EXPECT_EQ(replies_[0].first, "rid-exec");
  ASSERT_TRUE(replies_[0].second.has_exec_output());
  EXPECT_EQ(replies_[0].second.exec_output().exec_id(), 77u);
  EXPECT_EQ(replies_[0].second.exec_output().offset(), 10u);
  EXPECT_EQ(replies_[0].second.exec_output().data(), "abc");
  ASSERT_TRUE(replies_[1].second.has_exec_keepalive());
  EXPECT_EQ(replies_[1].second.exec_keepalive().session_id(), 5u);

  // From now on output goes straight to it, and the exit ends the session.
  relay_->OnAgentMessage("n2", Output(5, 13, "d"));
  v1::Envelope exited;
  exited.mutable_exec_exited()->set_exec_id(5);
  exited.mutable_exec_exited()->set_exit_code(3);
  relay_->OnAgentMessage("n2", exited);
  ASSERT_EQ(replies_.size(), 4u);
  EXPECT_EQ(replies_[2].second.exec_output().data(), "d");
  EXPECT_EQ(replies_[3].second.exec_exited().exec_id(), 77u);
  EXPECT_EQ(replies_[3].second.exec_exited().exit_code(), 3);
  EXPECT_EQ(relay_->sessions(), 0u);
}

TEST_F(ExecRelayRestartTest, ASessionNobodyReattachesIsEndedAtTheAgent) {
  const auto now = ExecRelay::Clock::now();
  google::protobuf::RepeatedPtrField<v1::ExecSessionReport> reports;
  *reports.Add() = Report(5, 1, 0);
  relay_->AdoptSessions("n3", reports, now);
  const size_t before = sink_.sent.size();
  // An adopted session waits longer than a client's usual silence: after an HA failover its
  // trainlet-exec first has to find the new leader.
  relay_->Tick(now + ExecRelay::kClientSilence + std::chrono::milliseconds(1));
  EXPECT_EQ(relay_->sessions(), 1u);
  relay_->Tick(now + ExecRelay::kReattachWindow + std::chrono::milliseconds(1));
  EXPECT_EQ(relay_->sessions(), 0u);
  ASSERT_EQ(sink_.sent.size(), before + 1);
  EXPECT_EQ(sink_.sent.back().first, "n3");
  ASSERT_TRUE(sink_.sent.back().second.has_exec_cancel());
  EXPECT_EQ(sink_.sent.back().second.exec_cancel().exec_id(), 5u);
}

// A command of an attempt that ends (the job finished or restarted) is stopped, and its
// trainlet-exec is told why, instead of hearing nothing and reporting 10 s later that it lost the
// coordinator (issue 19, "Messages that mislead").
TEST_F(ExecRelayRestartTest, TheEndOfTheAttemptIsToldToTrainletExec) {
  const auto now = ExecRelay::Clock::now();
  RouterMessage req;
  req.routing_id = "rid-exec";
  req.user_id = launcher_key_;
  req.envelope.mutable_exec_request()->set_exec_id(77);
  req.envelope.mutable_exec_request()->set_host("n2");
  req.envelope.mutable_exec_request()->add_argv("orted");
  relay_->OnClientMessage(req, now);
  ASSERT_EQ(relay_->sessions(), 1u);
  ASSERT_TRUE(replies_.empty());
  ReportAll("mpi", v1::WorkerEvent::KIND_EXITED, kT0 + 20);  // every rank exits 0: Succeeded
  relay_->Tick(now + std::chrono::milliseconds(1));
  EXPECT_EQ(relay_->sessions(), 0u);
  ASSERT_EQ(replies_.size(), 1u);
  EXPECT_EQ(replies_[0].first, "rid-exec");
  ASSERT_TRUE(replies_[0].second.has_exec_exited());
  EXPECT_EQ(replies_[0].second.exec_exited().exec_id(), 77u);
  EXPECT_EQ(replies_[0].second.exec_exited().error(),
            "attempt 1 of trainjob/mpi is over: the command on n2 was stopped");
  ASSERT_TRUE(sink_.sent.back().second.has_exec_cancel());  // and the agent stops it
}

}  // namespace
}  // namespace trainlet::coordinator
