#include "coordinator/node_reconcile.h"

#include <gtest/gtest.h>

#include <map>

namespace trainlet::coordinator {
namespace {

// Job "live" runs attempt 3: rank 0 Pending on node-a, rank 1 Running on node-a, rank 2 Pending
// on node-b.
v1::JobStatus Live() {
  v1::JobStatus st;
  st.set_name("live");
  st.set_attempt(3);
  const std::pair<const char*, v1::RankState> ranks[] = {{"node-a", v1::RANK_STATE_PENDING},
                                                         {"node-a", v1::RANK_STATE_RUNNING},
                                                         {"node-b", v1::RANK_STATE_PENDING}};
  uint32_t i = 0;
  for (const auto& [node, state] : ranks) {
    auto* r = st.add_ranks();
    r->set_rank(i++);
    r->set_node(node);
    r->set_rank_state(state);
  }
  return st;
}

class NodeReconcileTest : public ::testing::Test {
 protected:
  void Report(const std::string& job, uint32_t attempt, uint32_t rank, int32_t pid) {
    auto* w = running_.Add();
    w->set_job(job);
    w->set_attempt(attempt);
    w->set_rank(rank);
    w->set_pid(pid);
  }
  NodeReconcile Reconcile(const std::string& node) {
    return ReconcileRunning(
        node, running_, [this](const std::string& job, uint32_t attempt) -> const v1::JobStatus* {
          auto it = jobs_.find(job);
          if (it == jobs_.end() || it->second.attempt() != attempt) return nullptr;
          return &it->second;
        });
  }
  std::map<std::string, v1::JobStatus> jobs_ = {{"live", Live()}};
  google::protobuf::RepeatedPtrField<v1::RunningWorker> running_;
};

TEST_F(NodeReconcileTest, NothingReportedDoesNothing) {
  NodeReconcile r = Reconcile("node-a");
  EXPECT_TRUE(r.adopt.empty());
  EXPECT_TRUE(r.stop.empty());
}

TEST_F(NodeReconcileTest, PendingRankOfTheLiveAttemptIsAdoptedWithItsPid) {
  Report("live", 3, 0, 77);
  NodeReconcile r = Reconcile("node-a");
  ASSERT_EQ(r.adopt.size(), 1u);
  EXPECT_EQ(r.adopt[0].job, "live");
  EXPECT_EQ(r.adopt[0].rank_index, 0);
  EXPECT_EQ(r.adopt[0].pid, 77);
  EXPECT_TRUE(r.stop.empty());
}

TEST_F(NodeReconcileTest, RankAlreadyRunningOrPlacedElsewhereChangesNothing) {
  Report("live", 3, 1, 78);  // already Running
  Report("live", 3, 2, 79);  // placed on node-b
  NodeReconcile r = Reconcile("node-a");
  EXPECT_TRUE(r.adopt.empty());
  EXPECT_TRUE(r.stop.empty());
}

TEST_F(NodeReconcileTest, ARankReportedTwiceIsAdoptedOnceWithTheFirstPid) {
  Report("live", 3, 0, 77);
  Report("live", 3, 0, 88);
  NodeReconcile r = Reconcile("node-a");
  ASSERT_EQ(r.adopt.size(), 1u);
  EXPECT_EQ(r.adopt[0].pid, 77);
}

TEST_F(NodeReconcileTest, OlderAttemptsAndGoneJobsAreStoppedOncePerAttempt) {
  Report("live", 2, 0, 1);
  Report("live", 2, 1, 2);
  Report("gone", 1, 0, 3);
  Report("live", 3, 2, 4);  // node-b's rank: not this node's, but live: not stopped
  NodeReconcile r = Reconcile("node-a");
  EXPECT_TRUE(r.adopt.empty());
  const std::set<std::pair<std::string, uint32_t>> want = {{"live", 2}, {"gone", 1}};
  EXPECT_EQ(r.stop, want);
}

}  // namespace
}  // namespace trainlet::coordinator
