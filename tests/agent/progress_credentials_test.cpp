// The node's progress CA, server certificate and token secret: made once, private, reused.
#include "agent/progress_credentials.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <sstream>

#include "tests/common/test_dir.h"

namespace trainlet::agent {
namespace {

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

mode_t Mode(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 0777;
}

TEST(ProgressCredentials, MadeOncePrivateAndReusedAcrossRestarts) {
  testing::TempDir dir;
  testing::ScopedUmask umask(0);  // only the code's own modes keep the keys private
  auto first = ProgressCredentials::LoadOrCreate(dir.path(), {"127.0.0.1", "localhost"});
  ASSERT_TRUE(first.ok()) << first.status().message();
  EXPECT_EQ(first->token_secret.size(), 32u);
  EXPECT_EQ(first->last_port, 0);
  EXPECT_EQ(Mode(first->dir), 0700u);
  EXPECT_EQ(Mode(first->dir + "/ca.key"), 0600u);
  EXPECT_EQ(Mode(first->key_file), 0600u);
  EXPECT_EQ(Mode(first->dir + "/token.secret"), 0600u);
  EXPECT_EQ(Mode(first->ca_cert_file), 0644u);
  EXPECT_NE(Read(first->ca_cert_file).find("BEGIN CERTIFICATE"), std::string::npos);
  ASSERT_TRUE(first->RememberPort(4242).ok());

  const std::string ca = Read(first->ca_cert_file);
  const std::string cert = Read(first->cert_file);
  auto again = ProgressCredentials::LoadOrCreate(dir.path(), {"127.0.0.1", "localhost"});
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(again->token_secret, first->token_secret);
  EXPECT_EQ(again->last_port, 4242);
  EXPECT_EQ(Read(again->ca_cert_file), ca);
  EXPECT_EQ(Read(again->cert_file), cert);

  // A new address needs a new server certificate from the same CA.
  auto moved = ProgressCredentials::LoadOrCreate(dir.path(), {"10.1.2.3", "127.0.0.1"});
  ASSERT_TRUE(moved.ok()) << moved.status().message();
  EXPECT_EQ(Read(moved->ca_cert_file), ca);
  EXPECT_NE(Read(moved->cert_file), cert);
  EXPECT_EQ(moved->token_secret, first->token_secret);
}

TEST(ProgressCredentials, ABrokenFileIsMadeAgain) {
  testing::TempDir dir;
  auto first = ProgressCredentials::LoadOrCreate(dir.path(), {"127.0.0.1"});
  ASSERT_TRUE(first.ok()) << first.status().message();
  std::ofstream(first->dir + "/token.secret") << "short";
  std::ofstream(first->key_file) << "not a key";
  auto again = ProgressCredentials::LoadOrCreate(dir.path(), {"127.0.0.1"});
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(again->token_secret.size(), 32u);
  EXPECT_NE(again->token_secret, first->token_secret);
  EXPECT_NE(Read(again->key_file).find("PRIVATE KEY"), std::string::npos);
}

// An idle agent only locates them: no key material is read or made (no OpenSSL) until Complete.
TEST(ProgressCredentials, LocateMakesNothingCompleteDoes) {
  testing::TempDir dir;
  auto located = ProgressCredentials::Locate(dir.path());
  ASSERT_TRUE(located.ok()) << located.status().message();
  EXPECT_FALSE(located->complete());
  EXPECT_EQ(located->ca_cert_file, dir.path() + "/progress/ca.crt");
  EXPECT_EQ(Mode(dir.path() + "/progress"), 0700u);
  struct stat st {};
  EXPECT_NE(stat(located->ca_cert_file.c_str(), &st), 0) << "no CA yet";
  EXPECT_NE(stat(located->key_file.c_str(), &st), 0) << "no server key yet";
  ASSERT_TRUE(located->Complete({"127.0.0.1"}).ok());
  EXPECT_TRUE(located->complete());
  EXPECT_NE(Read(located->ca_cert_file).find("BEGIN CERTIFICATE"), std::string::npos);
  // What Complete made is what LoadOrCreate finds.
  auto loaded = ProgressCredentials::LoadOrCreate(dir.path(), {"127.0.0.1"});
  ASSERT_TRUE(loaded.ok());
  EXPECT_EQ(loaded->token_secret, located->token_secret);
  EXPECT_EQ(Read(loaded->cert_file), Read(located->cert_file));
}

}  // namespace
}  // namespace trainlet::agent
