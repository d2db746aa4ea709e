// Key files and allowlists come from operators' hands: every bad file must give an error that
// names it, and secret keys must never be readable by others.
#include "common/curve_keys.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "common/platform/env.h"
#include "tests/common/test_dir.h"
#include "tests/common/test_keys.h"

namespace trainlet {
namespace {

using ::testing::HasSubstr;

void WriteText(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
  ASSERT_TRUE(out.flush()) << path;
}

mode_t ModeOf(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 0777;
}

using ::trainlet::testing::NewKeys;

// '#' is a Z85 digit, so about a third of real keys contain one. Tests that are not about that
// use keys without it, so a failure points at the test that is.
CurveKeyPair NewKeysWithHash(bool with_hash) {
  for (int i = 0; i < 1000; ++i) {
    CurveKeyPair k = NewKeys();
    if ((k.public_z85.find('#') != std::string::npos) == with_hash) return k;
  }
  ADD_FAILURE() << "no key " << (with_hash ? "with" : "without") << " '#' in 1000 tries";
  return {};
}

TEST(CurveKeysTest, GeneratedPairsAreValidAndDistinct) {
  const CurveKeyPair a = NewKeys();
  const CurveKeyPair b = NewKeys();
  EXPECT_TRUE(IsValidZ85Key(a.public_z85));
  EXPECT_TRUE(IsValidZ85Key(a.secret_z85));
  EXPECT_NE(a.public_z85, a.secret_z85);
  EXPECT_NE(a.public_z85, b.public_z85);
}

TEST(CurveKeysTest, Z85Validation) {
  const CurveKeyPair k = NewKeys();
  EXPECT_FALSE(IsValidZ85Key(""));
  EXPECT_FALSE(IsValidZ85Key(k.public_z85.substr(0, 39)));
  EXPECT_FALSE(IsValidZ85Key(k.public_z85 + "0"));
  EXPECT_FALSE(IsValidZ85Key(std::string(40, ' ')));  // not in the Z85 alphabet
}

TEST(CurveKeysTest, WriteThenReadRoundTrips) {
  testing::TempDir dir;
  const std::string path = dir.File("agent.key");
  const CurveKeyPair keys = NewKeys();
  ASSERT_TRUE(WriteKeyPair(path, keys).ok());

  auto read = ReadKeyPair(path);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(read->public_z85, keys.public_z85);
  EXPECT_EQ(read->secret_z85, keys.secret_z85);

  auto pub = ReadKeyPair(path + ".pub");
  ASSERT_TRUE(pub.ok()) << pub.status().ToString();
  EXPECT_EQ(pub->public_z85, keys.public_z85);
  EXPECT_TRUE(pub->secret_z85.empty()) << "the .pub file leaks the secret key";
}

TEST(CurveKeysTest, ReadsThroughAnEnvAsFromAFile) {
  testing::TempDir dir;
  const std::string path = dir.File("agent.key");
  const CurveKeyPair keys = NewKeys();
  ASSERT_TRUE(WriteKeyPair(path, keys).ok());
  auto read = ReadKeyPair(platform::RealEnv(), path);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(read->public_z85, keys.public_z85);
  EXPECT_EQ(read->secret_z85, keys.secret_z85);

  // The errors are the file version's: the same code and words.
  for (const std::string& bad : {dir.File("absent.key"), dir.File("garbage.key")}) {
    if (bad == dir.File("garbage.key")) WriteText(bad, "this is not a key file\n");
    auto from_env = ReadKeyPair(platform::RealEnv(), bad);
    auto from_file = ReadKeyPair(bad);
    ASSERT_FALSE(from_env.ok());
    EXPECT_EQ(from_env.status().code(), from_file.status().code());
    EXPECT_EQ(from_env.status().message(), from_file.status().message());
  }
}

TEST(CurveKeysTest, SecretFileIsOwnerOnly) {
  testing::TempDir dir;
  const std::string path = dir.File("coordinator.key");
  ASSERT_TRUE(WriteKeyPair(path, NewKeys()).ok());
  EXPECT_EQ(ModeOf(path), 0600u);
  EXPECT_EQ(ModeOf(path + ".pub"), 0644u);
  // Overwriting an existing pair keeps the mode (the file is replaced, not rewritten in place).
  ::chmod(path.c_str(), 0644);
  ASSERT_TRUE(WriteKeyPair(path, NewKeys()).ok());
  EXPECT_EQ(ModeOf(path), 0600u);
}

TEST(CurveKeysTest, WriteIntoMissingDirectoryNamesThePath) {
  testing::TempDir dir;
  const std::string path = dir.File("no-such-dir/agent.key");
  Status st = WriteKeyPair(path, NewKeys());
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), ErrorCode::kIo);
  EXPECT_THAT(st.message(), HasSubstr(dir.File("no-such-dir")));
}

TEST(CurveKeysTest, MissingFileIsNotFoundAndNamed) {
  testing::TempDir dir;
  const std::string path = dir.File("absent.key");
  auto read = ReadKeyPair(path);
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.status().code(), ErrorCode::kNotFound);
  EXPECT_THAT(read.status().message(), HasSubstr(path));
}

TEST(CurveKeysTest, BadKeyFilesAreInvalidAndNamed) {
  testing::TempDir dir;
  const CurveKeyPair good = NewKeys();
  const struct {
    const char* name;
    std::string text;
    const char* says;
  } cases[] = {
      {"empty.key", "", "public-key"},
      {"garbage.key", "this is not a key file\n", "public-key"},
      {"short.key", "public-key = \"" + good.public_z85.substr(1) + "\"\n", "public-key"},
      {"badsecret.key",
       "public-key = \"" + good.public_z85 + "\"\nsecret-key = \"" + std::string(40, ' ') + "\"\n",
       "secret-key"},
      {"secretonly.key", "secret-key = \"" + good.secret_z85 + "\"\n", "public-key"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string path = dir.File(c.name);
    WriteText(path, c.text);
    auto read = ReadKeyPair(path);
    ASSERT_FALSE(read.ok());
    EXPECT_EQ(read.status().code(), ErrorCode::kInvalid);
    EXPECT_THAT(read.status().message(), HasSubstr(path));
    EXPECT_THAT(read.status().message(), HasSubstr(c.says));
  }
}

TEST(AllowlistTest, ParsesKeysNamesCommentsAndBlankLines) {
  testing::TempDir dir;
  const std::string path = dir.File("operators.allow");
  const CurveKeyPair a = NewKeysWithHash(false);
  const CurveKeyPair b = NewKeysWithHash(false);
  const CurveKeyPair c = NewKeysWithHash(false);
  WriteText(path,
            "# operators allowed to reach the coordinator\n"
            "\n" +
                a.public_z85 + " alice\n" + "   " + b.public_z85 + "\t bob   # on call\n" +
                c.public_z85 + "\n" + "   # indented comment\n");
  auto list = ReadAllowlist(path);
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  EXPECT_EQ(list->size(), 3u);
  EXPECT_EQ(list->at(a.public_z85), "alice");
  EXPECT_EQ(list->at(b.public_z85), "bob");
  EXPECT_EQ(list->at(c.public_z85), "");
}

TEST(AllowlistTest, HashInsideAKeyIsNotAComment) {
  testing::TempDir dir;
  const std::string path = dir.File("hash.allow");
  const CurveKeyPair k = NewKeysWithHash(true);
  ASSERT_TRUE(AppendToAllowlist(path, k.public_z85, "node-1").ok());
  std::ofstream(path, std::ios::app) << "# a real comment\n";
  auto list = ReadAllowlist(path);
  ASSERT_TRUE(list.ok()) << list.status().ToString() << " (key " << k.public_z85 << ")";
  ASSERT_EQ(list->count(k.public_z85), 1u);
  EXPECT_EQ(list->at(k.public_z85), "node-1");
}

TEST(AllowlistTest, EmptyFileIsAnEmptyList) {
  testing::TempDir dir;
  const std::string path = dir.File("empty.allow");
  WriteText(path, "# nobody yet\n");
  auto list = ReadAllowlist(path);
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  EXPECT_TRUE(list->empty());
}

TEST(AllowlistTest, BadLineGivesPathAndLineNumber) {
  testing::TempDir dir;
  const std::string path = dir.File("agents.allow");
  WriteText(path,
            "# agents\n" + NewKeysWithHash(false).public_z85 + " node-1\n\nnot-a-key node-2\n");
  auto list = ReadAllowlist(path);
  ASSERT_FALSE(list.ok());
  EXPECT_EQ(list.status().code(), ErrorCode::kInvalid);
  EXPECT_THAT(list.status().message(), HasSubstr(path + ":4:"));
}

TEST(AllowlistTest, MissingFileIsNotFoundAndNamed) {
  testing::TempDir dir;
  const std::string path = dir.File("absent.allow");
  auto list = ReadAllowlist(path);
  ASSERT_FALSE(list.ok());
  EXPECT_EQ(list.status().code(), ErrorCode::kNotFound);
  EXPECT_THAT(list.status().message(), HasSubstr(path));
}

TEST(AllowlistTest, AppendCreatesTheFileAndRefusesBadKeys) {
  testing::TempDir dir;
  const std::string path = dir.File("new.allow");
  const CurveKeyPair a = NewKeysWithHash(false);
  const CurveKeyPair b = NewKeysWithHash(false);
  ASSERT_TRUE(AppendToAllowlist(path, a.public_z85, "node-1").ok());
  ASSERT_TRUE(AppendToAllowlist(path, b.public_z85, "node-2").ok());
  Status bad = AppendToAllowlist(path, "short", "node-3");
  EXPECT_FALSE(bad.ok());
  EXPECT_EQ(bad.code(), ErrorCode::kInvalid);

  auto list = ReadAllowlist(path);
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  EXPECT_EQ(list->size(), 2u);
  EXPECT_EQ(list->at(a.public_z85), "node-1");
  EXPECT_EQ(list->at(b.public_z85), "node-2");
}

// A key's name becomes a file name and an allowlist line: nothing that leaves the directory or
// splits the line passes, and the allowlist is not touched by a refused one.
TEST(CurveKeys, KeyNamesThatCouldEscapeOrSplitALineAreRefused) {
  for (const char* good : {"node-1", "gpu01.example.com", "Alice", "carol.smith_2", "7"}) {
    EXPECT_TRUE(IsValidKeyName(good)) << good;
  }
  for (const char* bad : {"", "eve\nroot", "../evil", "a/b", "a b", "-x", ".hidden", "tab\tname"}) {
    EXPECT_FALSE(IsValidKeyName(bad)) << bad;
  }
  EXPECT_FALSE(IsValidKeyName(std::string(254, 'a')));
  testing::TempDir dir;
  const std::string path = dir.File("operators.allow");
  auto k = GenerateCurveKeyPair();
  ASSERT_TRUE(k.ok());
  Status s = AppendToAllowlist(path, k->public_z85, "eve\nroot");
  EXPECT_EQ(s.code(), ErrorCode::kInvalid) << s.ToString();
  EXPECT_FALSE(std::filesystem::exists(path) && std::filesystem::file_size(path) > 0);
}

}  // namespace
}  // namespace trainlet
