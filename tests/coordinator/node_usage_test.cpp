// NodeUsage: what live ranks hold on each node (slots, resources, jobs), and which nodes hold
// ranks of a live attempt.
#include "coordinator/node_usage.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

namespace trainlet::coordinator {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

class NodeUsageTest : public ::testing::Test {
 protected:
  // A job in `phase` whose current attempt 1 has one rank per (node, state) pair.
  JobEntry& AddJob(const std::string& name, v1::JobPhase phase,
                   const std::vector<std::pair<std::string, v1::RankState>>& ranks) {
    auto& job = *entries_.emplace_back(std::make_unique<JobEntry>());
    job.record.name = name;
    job.record.status.set_name(name);
    job.record.status.set_job_phase(phase);
    job.record.status.set_attempt(1);
    for (const auto& [node, state] : ranks) {
      auto* r = job.record.status.add_ranks();
      r->set_node(node);
      r->set_rank_state(state);
      r->set_attempt(1);
    }
    return job;
  }
  NodeUsage Usage() const {
    std::vector<const JobEntry*> jobs;
    for (const auto& e : entries_) jobs.push_back(e.get());
    return UsageOf(jobs);
  }

  std::vector<std::unique_ptr<JobEntry>> entries_;
};

TEST_F(NodeUsageTest, NothingPlacedHoldsNothing) {
  AddJob("pending", v1::JOB_PHASE_PENDING, {});
  const NodeUsage u = Usage();
  EXPECT_THAT(u.slots, IsEmpty());
  EXPECT_THAT(u.resources, IsEmpty());
  EXPECT_THAT(u.JobsOn("n1"), IsEmpty());
  EXPECT_EQ(u.LiveRanks("n1"), 0u);
  EXPECT_THAT(u.placed, IsEmpty());
}

TEST_F(NodeUsageTest, OnlyRanksThatHaveNotEndedHoldTheirNode) {
  AddJob("a", v1::JOB_PHASE_RUNNING,
         {{"n1", v1::RANK_STATE_RUNNING},
          {"n1", v1::RANK_STATE_PENDING},
          {"n2", v1::RANK_STATE_SUCCEEDED},
          {"n3", v1::RANK_STATE_LOST}});
  AddJob("b", v1::JOB_PHASE_RUNNING, {{"n1", v1::RANK_STATE_RUNNING}});
  const NodeUsage u = Usage();
  EXPECT_EQ(u.LiveRanks("n1"), 3u);
  EXPECT_EQ(u.LiveRanks("n2"), 0u);
  EXPECT_EQ(u.LiveRanks("n3"), 0u);
  EXPECT_THAT(u.JobsOn("n1"), ElementsAre("a", "b"));  // in the order given, each once
  EXPECT_THAT(u.JobsOn("n2"), IsEmpty());
}

TEST_F(NodeUsageTest, AJobsResourcesCountOncePerNodeWithALiveRank) {
  JobEntry& job = AddJob("gpu", v1::JOB_PHASE_RUNNING,
                         {{"n1", v1::RANK_STATE_RUNNING},
                          {"n1", v1::RANK_STATE_RUNNING},
                          {"n2", v1::RANK_STATE_FAILED}});
  job.gang.resources[ResourceKind::kNvidiaGpu] = 2;
  AddJob("plain", v1::JOB_PHASE_RUNNING, {{"n2", v1::RANK_STATE_RUNNING}});
  const NodeUsage u = Usage();
  ASSERT_EQ(u.resources.count("n1"), 1u);
  EXPECT_EQ(u.resources.at("n1")[ResourceKind::kNvidiaGpu], 2);
  EXPECT_EQ(u.resources.count("n2"), 0u);  // the gpu job's rank there ended; plain asks nothing
}

TEST_F(NodeUsageTest, PlacedCountsOnlyLiveAttempts) {
  // A failed attempt's ranks still hold their slots but are not a live attempt's.
  AddJob("restarting", v1::JOB_PHASE_RESTARTING, {{"n1", v1::RANK_STATE_RUNNING}});
  AddJob("starting", v1::JOB_PHASE_STARTING, {{"n2", v1::RANK_STATE_PENDING}});
  JobEntry& deleting = AddJob("deleting", v1::JOB_PHASE_RUNNING, {{"n3", v1::RANK_STATE_RUNNING}});
  deleting.record.status.set_deleting(true);
  const NodeUsage u = Usage();
  EXPECT_THAT(u.placed, ElementsAre("n2"));
  EXPECT_EQ(u.LiveRanks("n1"), 1u);
  EXPECT_EQ(u.LiveRanks("n3"), 1u);
}

}  // namespace
}  // namespace trainlet::coordinator
