// EtcdLeaderElection against real etcd: one leader at a time, the next takes over when the
// leader's lease ends, and the deposed leader's fenced writes do not land (counted in etcd).
#include "coordinator/etcd_leader_election.h"

#include <gtest/gtest.h>

#include <thread>

#include "coordinator/etcd_job_store.h"
#include "tests/coordinator/etcd_cluster.h"

namespace trainlet::coordinator {
namespace {

using Clock = EtcdLeaderElection::Clock;
using std::chrono::seconds;
using testing::EtcdCluster;

class EtcdLeaderElectionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string error;
    cluster_ = EtcdCluster::Start(1, &error);
    if (cluster_ == nullptr) {
      if (EtcdCluster::Binary().empty()) GTEST_SKIP() << error;
      FAIL() << error;
    }
    a_ = OpenStore();
    b_ = OpenStore();
    ASSERT_TRUE(a_ && b_);
  }
  std::unique_ptr<EtcdJobStore> OpenStore() {
    EtcdStoreConfig config;
    config.client.endpoints = cluster_->client_urls();
    config.prefix = "/trainlet/test/";
    auto s = EtcdJobStore::Open(config);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? std::move(s).value() : nullptr;
  }
  static JobRecord Job(const std::string& name) {
    JobRecord j;
    j.name = name;
    j.spec_yaml = "kind: TrainJob\n";
    j.runtime_kind = "ClusterTrainingRuntime";
    j.runtime_name = "plain";
    j.status.set_name(name);
    return j;
  }

  std::unique_ptr<EtcdCluster> cluster_;
  std::unique_ptr<EtcdJobStore> a_;
  std::unique_ptr<EtcdJobStore> b_;
};

TEST_F(EtcdLeaderElectionTest, OneLeaderAndADeposedLeaderCannotWrite) {
  EtcdLeaderElection ea(a_->client(), "/trainlet/test-election/", "coord-a", seconds(2));
  EtcdLeaderElection eb(b_->client(), "/trainlet/test-election/", "coord-b", seconds(2));
  auto sa = ea.Poll(Clock::now());
  ASSERT_TRUE(sa.ok()) << sa.status().ToString();
  EXPECT_TRUE(sa->leader);
  auto sb = eb.Poll(Clock::now());
  ASSERT_TRUE(sb.ok()) << sb.status().ToString();
  EXPECT_FALSE(sb->leader);
  EXPECT_EQ(sb->leader_identity, "coord-a");

  a_->SetWriteFence(ea.Fence());
  b_->SetWriteFence(eb.Fence());
  ASSERT_TRUE(a_->CreateJob(Job("by-a")).ok());

  // A stops renewing (a SIGSTOP, a GC pause) past its TTL; B renews and takes over.
  const auto paused = Clock::now();
  while (Clock::now() - paused < seconds(4)) {
    ASSERT_TRUE(eb.Poll(Clock::now()).ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  sb = eb.Poll(Clock::now());
  ASSERT_TRUE(sb.ok());
  EXPECT_TRUE(sb->leader);
  EXPECT_EQ(sb->leader_identity, "coord-b");
  // A's own view, without asking etcd: past its TTL it is no longer the leader.
  EXPECT_FALSE(ea.state(Clock::now()).leader);
  b_->SetWriteFence(eb.Fence());
  ASSERT_TRUE(b_->CreateJob(Job("by-b")).ok());

  // A wakes up and writes with its old fence: nothing lands.
  const int64_t keys = *a_->CountKeys();
  for (int i = 0; i < 5; ++i) {
    Status st = a_->CreateJob(Job("stale-" + std::to_string(i)));
    EXPECT_EQ(st.code(), ErrorCode::kUnavailable) << st.ToString();
    EXPECT_NE(st.message().find("not the leader"), std::string::npos) << st.message();
  }
  EXPECT_EQ(*a_->CountKeys(), keys);
  // And once it polls, it follows B.
  sa = ea.Poll(Clock::now());
  ASSERT_TRUE(sa.ok()) << sa.status().ToString();
  EXPECT_FALSE(sa->leader);
  EXPECT_EQ(sa->leader_identity, "coord-b");

  // B resigns: A leads at once.
  ASSERT_TRUE(eb.Resign().ok());
  sa = ea.Poll(Clock::now());
  ASSERT_TRUE(sa.ok());
  EXPECT_TRUE(sa->leader);
}

// Cut off from etcd, a leader cannot renew; it counts itself a follower once its TTL has passed
// since the last renewal, without hearing anything from etcd.
TEST_F(EtcdLeaderElectionTest, ALeaderThatLosesEtcdStepsDownWithinItsTtl) {
  EtcdLeaderElection ea(a_->client(), "/trainlet/test-election/", "coord-a", seconds(2));
  const auto t0 = Clock::now();
  auto sa = ea.Poll(t0);
  ASSERT_TRUE(sa.ok()) << sa.status().ToString();
  ASSERT_TRUE(sa->leader);
  cluster_->Kill(0);
  auto failed = ea.Poll(t0 + std::chrono::milliseconds(500));
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), ErrorCode::kUnavailable);
  EXPECT_TRUE(ea.state(t0 + std::chrono::milliseconds(1900)).leader);
  EXPECT_FALSE(ea.state(t0 + seconds(2)).leader);
}

}  // namespace
}  // namespace trainlet::coordinator
