// The one reader of a rank's secrets (common/secret_env.h): the value itself when set, else the
// file NAME_FILE names; a file that cannot be read is an error naming it.
#include "common/secret_env.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <fstream>

#include "tests/common/test_dir.h"

namespace trainlet {
namespace {

constexpr char kName[] = "TRAINLET_TEST_SECRET";

class SecretEnvTest : public ::testing::Test {
 protected:
  void SetUp() override { Clear(); }
  void TearDown() override { Clear(); }
  static void Clear() {
    unsetenv(kName);
    unsetenv((std::string(kName) + "_FILE").c_str());
  }
  std::string Write(const std::string& text) {
    const std::string path = dir_.File("secret");
    std::ofstream(path) << text;
    return path;
  }
  testing::TempDir dir_;
};

TEST_F(SecretEnvTest, NeitherSetIsEmptyWithoutError) {
  const SecretFromEnv s = ReadSecretFromEnv(kName);
  EXPECT_EQ(s.value, "");
  EXPECT_EQ(s.error, "");
}

TEST_F(SecretEnvTest, TheFileIsRead) {
  setenv("TRAINLET_TEST_SECRET_FILE", Write("tok-1\n").c_str(), 1);
  const SecretFromEnv s = ReadSecretFromEnv(kName);
  EXPECT_EQ(s.value, "tok-1");  // one trailing newline dropped
  EXPECT_EQ(s.error, "");
}

TEST_F(SecretEnvTest, ThePlainValueWins) {
  setenv("TRAINLET_TEST_SECRET_FILE", Write("from-file").c_str(), 1);
  setenv(kName, "from-env", 1);
  EXPECT_EQ(ReadSecretFromEnv(kName).value, "from-env");
}

TEST_F(SecretEnvTest, AnUnreadableOrEmptyFileIsAnErrorNamingIt) {
  setenv("TRAINLET_TEST_SECRET_FILE", dir_.File("missing").c_str(), 1);
  SecretFromEnv s = ReadSecretFromEnv(kName);
  EXPECT_EQ(s.value, "");
  EXPECT_NE(s.error.find("TRAINLET_TEST_SECRET_FILE=" + dir_.File("missing")), std::string::npos)
      << s.error;
  setenv("TRAINLET_TEST_SECRET_FILE", Write("").c_str(), 1);
  s = ReadSecretFromEnv(kName);
  EXPECT_NE(s.error.find("empty"), std::string::npos) << s.error;
}

}  // namespace
}  // namespace trainlet
