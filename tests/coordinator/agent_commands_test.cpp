// AgentCommands: each command reaches the named node once, with every field set.
#include "coordinator/agent_commands.h"

#include <gtest/gtest.h>
#include <signal.h>

#include "recording_sink.h"

namespace trainlet::coordinator {
namespace {

using testing::EnvelopeRecorder;

TEST(AgentCommands, StopWorkersNamesJobAttemptAndReason) {
  EnvelopeRecorder sink;
  AgentCommands agents(&sink);
  agents.StopWorkers("n2", "job-a", 3, "trainjob deleted");
  ASSERT_EQ(sink.sent.size(), 1u);
  EXPECT_EQ(sink.sent[0].first, "n2");
  ASSERT_TRUE(sink.sent[0].second.has_stop_workers());
  const v1::StopWorkers& stop = sink.sent[0].second.stop_workers();
  EXPECT_EQ(stop.job(), "job-a");
  EXPECT_EQ(stop.attempt(), 3u);
  EXPECT_EQ(stop.reason(), "trainjob deleted");
}

TEST(AgentCommands, StopWorkersCarriesTheWarningAndWarnWorkersStopsNothing) {
  EnvelopeRecorder sink;
  AgentCommands agents(&sink);
  agents.StopWorkers("n1", "job-a", 2, "preempted", StopWarning{SIGUSR1, 30000});
  agents.WarnWorkers("n2", "job-a", 2, "deadline near", SIGUSR2);
  agents.StopWorkers("n1", "job-a", 2, "deleted");
  ASSERT_EQ(sink.sent.size(), 3u);
  const v1::StopWorkers& warned = sink.sent[0].second.stop_workers();
  EXPECT_EQ(warned.warning_signal(), SIGUSR1);
  EXPECT_EQ(warned.warning_grace_ms(), 30000u);
  EXPECT_FALSE(warned.warn_only());
  EXPECT_EQ(sink.sent[1].first, "n2");
  const v1::StopWorkers& alone = sink.sent[1].second.stop_workers();
  EXPECT_TRUE(alone.warn_only());
  EXPECT_EQ(alone.warning_signal(), SIGUSR2);
  EXPECT_EQ(alone.reason(), "deadline near");
  const v1::StopWorkers& plain = sink.sent[2].second.stop_workers();
  EXPECT_EQ(plain.warning_signal(), 0);
  EXPECT_FALSE(plain.warn_only());
}

TEST(AgentCommands, ReservePortsAsksForTheCount) {
  EnvelopeRecorder sink;
  AgentCommands agents(&sink);
  agents.ReservePorts("n1", "job-b", 2, 5, "", "uid-b");
  ASSERT_EQ(sink.sent.size(), 1u);
  EXPECT_EQ(sink.sent[0].first, "n1");
  ASSERT_TRUE(sink.sent[0].second.has_reserve_ports());
  const v1::ReservePorts& ask = sink.sent[0].second.reserve_ports();
  EXPECT_EQ(ask.job(), "job-b");
  EXPECT_EQ(ask.attempt(), 2u);
  EXPECT_EQ(ask.count(), 5u);
  EXPECT_EQ(ask.job_uid(), "uid-b");
}

TEST(AgentCommands, LaunchPlanIsSentAsGiven) {
  EnvelopeRecorder sink;
  AgentCommands agents(&sink);
  v1::LaunchPlan plan;
  plan.set_job("job-c");
  plan.set_attempt(1);
  plan.set_binding("none");
  agents.LaunchPlan("n3", plan);
  ASSERT_EQ(sink.sent.size(), 1u);
  EXPECT_EQ(sink.sent[0].first, "n3");
  ASSERT_TRUE(sink.sent[0].second.has_launch_plan());
  EXPECT_EQ(sink.sent[0].second.launch_plan().SerializeAsString(), plan.SerializeAsString());
}

TEST(AgentCommands, CommandsKeepTheirOrder) {
  EnvelopeRecorder sink;
  AgentCommands agents(&sink);
  agents.ReservePorts("n1", "j", 1, 1);
  agents.StopWorkers("n1", "j", 1, "stale port reservation");
  ASSERT_EQ(sink.sent.size(), 2u);
  EXPECT_TRUE(sink.sent[0].second.has_reserve_ports());
  EXPECT_TRUE(sink.sent[1].second.has_stop_workers());
}

TEST(AgentCommands, DefaultStopGraceIsTenSeconds) { EXPECT_EQ(kDefaultStopGraceMs, 10000u); }

}  // namespace
}  // namespace trainlet::coordinator
