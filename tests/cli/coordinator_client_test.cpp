// trainletctl's CoordinatorClient with several coordinators (issue 17): config.yaml's list
// form, a NotLeader answer followed to the leader it names (with one endpoint and with a list),
// an endpoint that takes no connection skipped, and a follower's refusal reported when no one
// leads. Two CURVE ROUTERs on 127.0.0.1 stand in for the coordinators, served on a thread.
#include "trainletctl/coordinator_client.h"

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include "common/zap_authenticator.h"
#include "common/zmq_sockets.h"
#include "tests/common/test_keys.h"
#include "trainletctl/client_config.h"

namespace trainlet::cli {
namespace {

namespace fs = std::filesystem;
using ::trainlet::testing::NewKeys;

class CoordinatorClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("trainlet-cc-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    server_ = NewKeys();
    operator_ = NewKeys();
    ASSERT_TRUE(WriteKeyPair((dir_ / "coordinator.key").string(), server_).ok());
    ASSERT_TRUE(WriteKeyPair((dir_ / "operator.key").string(), operator_).ok());
    auto zap = ZapAuthenticator::Create(ctx_);
    ASSERT_TRUE(zap.ok());
    zap_ = std::move(zap).value();
    zap_->SetAllowlist("operator", {{operator_.public_z85, "alice"}});
    for (int i = 0; i < 2; ++i) {
      auto r = BindCurveRouter(ctx_, "tcp://127.0.0.1:0", server_, "operator", &endpoint_[i]);
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      router_[i].emplace(std::move(r).value());
    }
    serving_ = std::thread([this] { Serve(); });
  }
  void TearDown() override {
    stop_ = true;
    if (serving_.joinable()) serving_.join();
    fs::remove_all(dir_);
  }

  // Router 0 is a follower naming router 1 (or no one, with no_leader_); router 1 leads.
  void Serve() {
    DropCounters drops;
    while (!stop_) {
      zmq::pollitem_t items[] = {{zap_->socket().handle(), 0, ZMQ_POLLIN, 0},
                                 {router_[0]->handle(), 0, ZMQ_POLLIN, 0},
                                 {router_[1]->handle(), 0, ZMQ_POLLIN, 0}};
      zmq::poll(items, 3, std::chrono::milliseconds(10));
      if (items[0].revents & ZMQ_POLLIN) zap_->HandleRequest();
      for (int i = 0; i < 2; ++i) {
        if (!(items[i + 1].revents & ZMQ_POLLIN)) continue;
        auto msg = ReceiveFromRouter(*router_[i], drops);
        if (!msg) continue;
        ++served_[i];
        v1::Envelope env;
        auto* r = env.mutable_operator_response();
        r->set_request_id(msg->envelope.operator_request().request_id());
        if (i == 0) {
          r->set_error_code("NotLeader");
          r->set_error(no_leader_ ? "this coordinator is not the leader and no leader is elected "
                                    "yet; the election cannot reach etcd: no quorum"
                                  : "this coordinator is not the leader");
          if (!no_leader_) r->set_leader(endpoint_[1]);
        } else {
          r->mutable_jobs();
        }
        SendToRouterPeer(*router_[i], msg->routing_id, env);
      }
    }
  }

  ClientConfig Config(const std::string& coordinators) {
    ClientConfig c;
    c.home = dir_.string();
    c.coordinator = coordinators;
    c.coordinator_key_file = (dir_ / "coordinator.key.pub").string();
    c.key_file = (dir_ / "operator.key").string();
    return c;
  }
  static v1::OperatorRequest GetJobs() {
    v1::OperatorRequest req;
    req.mutable_get_jobs();
    return req;
  }

  fs::path dir_;
  CurveKeyPair server_, operator_;
  zmq::context_t ctx_;
  std::unique_ptr<ZapAuthenticator> zap_;
  std::optional<zmq::socket_t> router_[2];
  std::string endpoint_[2];
  std::atomic<bool> stop_{false};
  std::atomic<bool> no_leader_{false};
  std::atomic<int> served_[2] = {0, 0};
  std::thread serving_;
};

TEST_F(CoordinatorClientTest, AFollowersAnswerIsFollowedToTheLeaderWithOneEndpoint) {
  auto client = CoordinatorClient::Connect(Config(endpoint_[0]));
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  auto r = (*client)->Call(GetJobs(), std::chrono::seconds(5));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->has_jobs());
  EXPECT_EQ(served_[0], 1);
  EXPECT_EQ(served_[1], 1);
}

TEST_F(CoordinatorClientTest, AListSkipsAnEndpointThatTakesNoConnection) {
  // A port nobody listens on: bound and closed again.
  std::string dead;
  {
    zmq::context_t c;
    auto r = BindCurveRouter(c, "tcp://127.0.0.1:0", server_, "operator", &dead);
    ASSERT_TRUE(r.ok());
  }
  auto client = CoordinatorClient::Connect(Config(dead + "," + endpoint_[0]));
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  const auto start = std::chrono::steady_clock::now();
  auto r = (*client)->Call(GetJobs(), std::chrono::seconds(10));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_LT(std::chrono::steady_clock::now() - start,
            CoordinatorClient::kConnectTimeout + std::chrono::seconds(2));
  EXPECT_EQ(served_[1], 1);  // via the follower's answer
}

TEST_F(CoordinatorClientTest, WithNoLeaderTheFollowersReasonIsReported) {
  no_leader_ = true;
  auto client = CoordinatorClient::Connect(Config(endpoint_[0] + "," + endpoint_[0]));
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  auto r = (*client)->Call(GetJobs(), std::chrono::seconds(2));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kUnavailable);
  EXPECT_NE(r.status().message().find("no quorum"), std::string::npos) << r.status().message();
  EXPECT_GT(served_[0], 1);  // asked again while no one led
  EXPECT_EQ(served_[1], 0);
}

TEST(ClientConfigTest, CoordinatorMayBeAYamlList) {
  const fs::path dir = fs::temp_directory_path() / ("trainlet-cfg-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "config.yaml")
      << "coordinator: [tcp://a:7071, tcp://b:7071]\ncoordinator_key: k.pub\nkey: k\n";
  auto c = LoadClientConfig(dir.string());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->coordinator, "tcp://a:7071,tcp://b:7071");
  std::ofstream(dir / "config.yaml") << "coordinator: []\ncoordinator_key: k.pub\nkey: k\n";
  EXPECT_FALSE(LoadClientConfig(dir.string()).ok());
  fs::remove_all(dir);
}

}  // namespace
}  // namespace trainlet::cli
