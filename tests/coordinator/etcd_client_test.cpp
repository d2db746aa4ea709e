// EtcdClient against one real etcd member: binary keys and values survive the JSON gateway,
// txns compare and branch, leases expire, and bad config names its field.
#include "coordinator/etcd_client.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

#include "tests/coordinator/etcd_cluster.h"

namespace trainlet::coordinator {
namespace {

using testing::EtcdCluster;

class EtcdClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string error;
    cluster_ = EtcdCluster::Start(1, &error);
    if (cluster_ == nullptr) {
      if (EtcdCluster::Binary().empty()) GTEST_SKIP() << error;
      FAIL() << error;
    }
    EtcdClientConfig config;
    config.endpoints = cluster_->client_urls();
    auto client = EtcdClient::Create(config);
    ASSERT_TRUE(client.ok()) << client.status().ToString();
    client_ = std::move(client).value();
  }

  std::unique_ptr<EtcdCluster> cluster_;
  std::unique_ptr<EtcdClient> client_;
};

TEST_F(EtcdClientTest, BinaryKeysAndValuesRoundTrip) {
  std::string every_byte;
  for (int i = 0; i < 256; ++i) every_byte.push_back(static_cast<char>(i));
  for (size_t len : {0u, 1u, 2u, 3u, 4u, 255u, 256u}) {
    const std::string key = "/bin/" + std::to_string(len);
    const std::string value = every_byte.substr(0, len);
    ASSERT_TRUE(client_->Txn({}, {EtcdOp::Put(key, value)}, {}).ok());
    auto got = client_->Range(key, "");
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ASSERT_EQ(got->size(), 1u);
    EXPECT_EQ((*got)[0].value, value) << len;
    EXPECT_GT((*got)[0].create_revision, 0);
  }
  auto all = client_->Range("/bin/", EtcdClient::PrefixEnd("/bin/"));
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), 7u);
  EXPECT_EQ(EtcdClient::PrefixEnd("/a/"), "/a0");
}

TEST_F(EtcdClientTest, TxnComparesAndBranches) {
  EtcdCompare absent{"/k", EtcdCompare::Target::kCreate, EtcdCompare::Result::kEqual, 0, ""};
  auto first = client_->Txn({absent}, {EtcdOp::Put("/k", "1")}, {EtcdOp::Range("/k")});
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_TRUE(first->succeeded);
  auto second = client_->Txn({absent}, {EtcdOp::Put("/k", "2")}, {EtcdOp::Range("/k")});
  ASSERT_TRUE(second.ok());
  EXPECT_FALSE(second->succeeded);
  ASSERT_EQ(second->ranges.size(), 1u);
  ASSERT_EQ(second->ranges[0].size(), 1u);
  EXPECT_EQ(second->ranges[0][0].value, "1");
  // etcd refuses a txn writing one key twice; the message says it is etcd's refusal.
  auto dup = client_->Txn({}, {EtcdOp::Put("/d", "1"), EtcdOp::Put("/d", "2")}, {});
  ASSERT_FALSE(dup.ok());
  EXPECT_EQ(dup.status().code(), ErrorCode::kInvalid);
  EXPECT_NE(dup.status().message().find("duplicate key"), std::string::npos)
      << dup.status().message();
}

TEST_F(EtcdClientTest, LeaseKeysGoWithTheLease) {
  auto lease = client_->LeaseGrant(2);
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  ASSERT_NE(*lease, 0);
  ASSERT_TRUE(client_->Txn({}, {EtcdOp::Put("/leased", "x", *lease)}, {}).ok());
  auto ttl = client_->LeaseKeepAlive(*lease);
  ASSERT_TRUE(ttl.ok()) << ttl.status().ToString();
  EXPECT_GT(*ttl, 0);
  ASSERT_TRUE(client_->LeaseRevoke(*lease).ok());
  EXPECT_TRUE(client_->Range("/leased", "")->empty());
  auto gone = client_->LeaseKeepAlive(*lease);
  ASSERT_TRUE(gone.ok()) << gone.status().ToString();
  EXPECT_EQ(*gone, 0);
}

// https with a client certificate, as a production cluster runs: with the CA and the
// certificate it works; without the certificate, or without the CA, the connection is refused
// and the error says etcd is unreachable.
TEST(EtcdClientTlsTest, ClientCertificateAndCa) {
  if (EtcdCluster::Binary().empty()) GTEST_SKIP() << "etcd is not installed";
  char tmpl[] = "/tmp/trainlet-etcd-tls-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  EtcdCluster::Tls tls;
  ASSERT_TRUE(EtcdCluster::MakeTls(tmpl, &tls)) << "openssl failed";
  std::string error;
  auto cluster = EtcdCluster::Start(1, &error, &tls);
  ASSERT_NE(cluster, nullptr) << error;
  ASSERT_EQ(cluster->client_url(0).rfind("https://", 0), 0u);

  EtcdClientConfig config;
  config.endpoints = cluster->client_urls();
  config.ca_file = tls.ca;
  config.cert_file = tls.client_cert;
  config.key_file = tls.client_key;
  auto client = EtcdClient::Create(config);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  ASSERT_TRUE((*client)->Txn({}, {EtcdOp::Put("/tls", "yes")}, {}).ok());
  auto got = (*client)->Range("/tls", "");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ((*got)[0].value, "yes");

  EtcdClientConfig no_cert = config;
  no_cert.cert_file.clear();
  no_cert.key_file.clear();
  auto refused = (*EtcdClient::Create(no_cert))->Range("/tls", "");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), ErrorCode::kUnavailable) << refused.status().ToString();

  EtcdClientConfig no_ca = config;
  no_ca.ca_file.clear();  // the system's CAs do not know the test CA
  auto unverified = (*EtcdClient::Create(no_ca))->Range("/tls", "");
  ASSERT_FALSE(unverified.ok());
  EXPECT_NE(unverified.status().message().find("unreachable"), std::string::npos)
      << unverified.status().message();
  cluster.reset();
  std::filesystem::remove_all(tmpl);
}

TEST(EtcdClientConfigTest, ErrorsNameTheField) {
  EtcdClientConfig config;
  EXPECT_EQ(EtcdClient::Create(config).status().message(), "endpoints: at least one etcd endpoint");
  config.endpoints = {"127.0.0.1:2379"};
  EXPECT_NE(EtcdClient::Create(config).status().message().find("endpoints: \"127.0.0.1:2379\""),
            std::string::npos);
  config.endpoints = {"https://127.0.0.1:2379"};
  config.ca_file = "/nonexistent/ca.pem";
  EXPECT_EQ(EtcdClient::Create(config).status().message(),
            "ca_file: /nonexistent/ca.pem: no such file");
}

}  // namespace
}  // namespace trainlet::coordinator
