// EtcdLeaderCampaign against real etcd: one leader at a time, the identity a follower reads,
// takeover within the TTL after the leader dies without resigning, at once after it resigns, and
// a leader that loses etcd stepping down within its TTL by its own clock.
#include "coordinator/etcd_leader_campaign.h"

#include <gtest/gtest.h>

#include <functional>
#include <thread>

#include "tests/coordinator/etcd_cluster.h"

namespace trainlet::coordinator {
namespace {

using Clock = EtcdLeaderCampaign::Clock;
using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::EtcdCluster;

class EtcdLeaderCampaignTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string error;
    cluster_ = EtcdCluster::Start(1, &error);
    if (cluster_ == nullptr) {
      if (EtcdCluster::Binary().empty()) GTEST_SKIP() << error;
      FAIL() << error;
    }
  }
  std::unique_ptr<EtcdLeaderCampaign> Campaign(const std::string& name) {
    EtcdLeaderCampaign::Options o;
    o.client.endpoints = cluster_->client_urls();
    o.client.request_timeout = milliseconds(1000);
    o.client.connect_timeout = milliseconds(300);
    o.election_prefix = "/trainlet/test/election/";
    o.identity = {name, "tcp://op-" + name, "tcp://agent-" + name};
    o.ttl = seconds(2);
    o.follower_poll = milliseconds(100);
    auto c = EtcdLeaderCampaign::Start(o);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return c.ok() ? std::move(c).value() : nullptr;
  }
  // Waits up to `limit` for `done`; how long it took, or nullopt.
  static std::optional<milliseconds> WaitFor(milliseconds limit,
                                             const std::function<bool()>& done) {
    const auto start = Clock::now();
    while (Clock::now() - start < limit) {
      if (done()) return std::chrono::duration_cast<milliseconds>(Clock::now() - start);
      std::this_thread::sleep_for(milliseconds(20));
    }
    return std::nullopt;
  }

  std::unique_ptr<EtcdCluster> cluster_;
};

TEST_F(EtcdLeaderCampaignTest, OneLeadsAndTheOtherNamesIt) {
  auto a = Campaign("a");
  ASSERT_TRUE(WaitFor(seconds(5), [&] { return a->view(Clock::now()).leader; }));
  auto b = Campaign("b");
  ASSERT_TRUE(
      WaitFor(seconds(5), [&] { return b->view(Clock::now()).leader_identity.has_value(); }));
  const auto vb = b->view(Clock::now());
  EXPECT_FALSE(vb.leader);
  EXPECT_EQ(vb.leader_identity->name, "a");
  EXPECT_EQ(vb.leader_identity->operator_endpoint, "tcp://op-a");
  EXPECT_EQ(vb.leader_identity->agent_endpoint, "tcp://agent-a");
  const auto va = a->view(Clock::now());
  ASSERT_TRUE(va.fence.has_value());
  EXPECT_TRUE(vb.fence.has_value());
  EXPECT_NE(va.fence->key, vb.fence->key);
}

TEST_F(EtcdLeaderCampaignTest, AFollowerTakesOverWithinTheTtlOfACrashedLeader) {
  auto a = Campaign("a");
  ASSERT_TRUE(WaitFor(seconds(5), [&] { return a->view(Clock::now()).leader; }));
  auto b = Campaign("b");
  ASSERT_TRUE(
      WaitFor(seconds(5), [&] { return b->view(Clock::now()).leader_identity.has_value(); }));
  a.reset();  // stops renewing without resigning: as a kill -9 leaves it
  auto took = WaitFor(seconds(6), [&] { return b->view(Clock::now()).leader; });
  ASSERT_TRUE(took) << "b never took over";
  EXPECT_LT(*took, milliseconds(2000 + 1500)) << "TTL 2 s plus a margin";
  EXPECT_EQ(b->view(Clock::now()).leader_identity->name, "b");
}

TEST_F(EtcdLeaderCampaignTest, AResignedLeaderIsSucceededAtOnce) {
  auto a = Campaign("a");
  ASSERT_TRUE(WaitFor(seconds(5), [&] { return a->view(Clock::now()).leader; }));
  auto b = Campaign("b");
  ASSERT_TRUE(
      WaitFor(seconds(5), [&] { return b->view(Clock::now()).leader_identity.has_value(); }));
  ASSERT_TRUE(a->Resign().ok());
  auto took = WaitFor(seconds(5), [&] { return b->view(Clock::now()).leader; });
  ASSERT_TRUE(took);
  EXPECT_LT(*took, milliseconds(1000));
}

TEST_F(EtcdLeaderCampaignTest, ALeaderThatLosesEtcdStepsDownWithinItsTtl) {
  auto a = Campaign("a");
  ASSERT_TRUE(WaitFor(seconds(5), [&] { return a->view(Clock::now()).leader; }));
  cluster_->Kill(0);
  auto gone = WaitFor(seconds(5), [&] { return !a->view(Clock::now()).leader; });
  ASSERT_TRUE(gone) << "still the leader with etcd gone";
  EXPECT_LE(*gone, milliseconds(2000 + 100));
  // Its own view, aged by the caller's clock, says so at once for a late reader too.
  EXPECT_FALSE(a->view(Clock::now() + seconds(3)).leader);
}

TEST(LeaderIdentityTest, RoundTripsAndKeepsAForeignValueAsItsName) {
  LeaderIdentity id{"host:1", "tcp://h:7071", "tcp://h:7070"};
  const LeaderIdentity back = LeaderIdentity::FromJson(id.ToJson());
  EXPECT_EQ(back.name, "host:1");
  EXPECT_EQ(back.operator_endpoint, "tcp://h:7071");
  EXPECT_EQ(back.agent_endpoint, "tcp://h:7070");
  EXPECT_EQ(LeaderIdentity::FromJson("coord-a").name, "coord-a");
  EXPECT_TRUE(LeaderIdentity::FromJson("coord-a").operator_endpoint.empty());
}

}  // namespace
}  // namespace trainlet::coordinator
