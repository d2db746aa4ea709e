// ReadApplyInput: what `trainletctl apply -f` refuses before sending, and why (issue 19).
#include "trainletctl/apply_input.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace trainlet::cli {
namespace {

namespace fs = std::filesystem;

class ApplyInputTest : public ::testing::Test {
 protected:
  ApplyInputTest() : dir_(fs::temp_directory_path() / ("apply-input-" + std::to_string(getpid()))) {
    fs::create_directories(dir_);
  }
  ~ApplyInputTest() override { fs::remove_all(dir_); }
  std::string Write(const std::string& name, const std::string& text) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }
  fs::path dir_;
};

TEST_F(ApplyInputTest, ReadsAGoodFile) {
  const std::string text = "kind: TrainJob\nmetadata: {name: caf\xc3\xa9}  # \xf0\x9f\x9a\x80\n";
  auto got = ReadApplyInput(Write("good.yaml", text));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, text);
}

TEST_F(ApplyInputTest, EmptyOrBlankFileIsRefused) {
  for (const char* text : {"", " \n\t\r\n"}) {
    const std::string path = Write("empty.yaml", text);
    auto got = ReadApplyInput(path);
    ASSERT_FALSE(got.ok());
    EXPECT_EQ(got.status().message(), "-f " + path + ": the file is empty: nothing to apply");
  }
}

TEST_F(ApplyInputTest, MissingFileIsRefused) {
  auto got = ReadApplyInput((dir_ / "nope.yaml").string());
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.status().message().find("cannot read the file"), std::string::npos);
}

TEST_F(ApplyInputTest, FileOverTheCapIsRefusedWithItsSize) {
  const std::string path = Write("big.yaml", std::string(101, '#'));
  auto got = ReadApplyInput(path, 100);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().message(),
            "-f " + path +
                ": 101 bytes, more than the 100 bytes one apply may carry: split it into several "
                "files");
  EXPECT_TRUE(ReadApplyInput(Write("fits.yaml", std::string(100, '#')), 100).ok());
}

TEST_F(ApplyInputTest, NonUtf8IsRefusedWithLineAndColumn) {
  const std::string path = Write("latin1.yaml", "a: 1\nname: caf\xe9\n");
  auto got = ReadApplyInput(path);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().message(), "-f " + path +
                                        ": not UTF-8 text: byte 0xe9 at line 2, column 10 (YAML "
                                        "files must be UTF-8)");
}

TEST(FirstInvalidUtf8, FollowsRfc3629) {
  EXPECT_EQ(FirstInvalidUtf8("plain ascii"), std::string_view::npos);
  EXPECT_EQ(FirstInvalidUtf8("\xc3\xa9\xe2\x82\xac\xf0\x9f\x9a\x80"), std::string_view::npos);
  EXPECT_EQ(FirstInvalidUtf8("ab\xff"), 2u);            // never valid
  EXPECT_EQ(FirstInvalidUtf8("\xc0\xaf"), 0u);          // overlong '/'
  EXPECT_EQ(FirstInvalidUtf8("\xe0\x80\xaf"), 0u);      // overlong
  EXPECT_EQ(FirstInvalidUtf8("x\xed\xa0\x80"), 1u);     // a surrogate
  EXPECT_EQ(FirstInvalidUtf8("\xf4\x90\x80\x80"), 0u);  // past U+10FFFF
  EXPECT_EQ(FirstInvalidUtf8("ok\xe2\x82"), 2u);        // cut short
  EXPECT_EQ(FirstInvalidUtf8("\xe2\x28\xa1"), 0u);      // bad continuation
}

// As kubectl apply -f DIR: the directory's .yaml, .yml and .json files, in name order, as one
// multi-document text; nothing below it, no other file, no empty one. Before, a directory read as
// an empty file ("the file is empty: nothing to apply").
TEST_F(ApplyInputTest, ADirectoryIsItsYamlAndJsonFilesInNameOrder) {
  const fs::path d = dir_ / "manifests";
  fs::create_directories(d / "nested");
  std::ofstream(d / "b.yml") << "kind: B";  // no final newline
  std::ofstream(d / "a.yaml") << "kind: A\n";
  std::ofstream(d / "c.json") << "{\"kind\": \"C\"}\n";
  std::ofstream(d / "empty.yaml") << "  \n";
  std::ofstream(d / "notes.txt") << "kind: Ignored\n";
  std::ofstream(d / "nested" / "d.yaml") << "kind: Nested\n";
  auto got = ReadApplyInput(d.string());
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, "---\nkind: A\n---\nkind: B\n---\n{\"kind\": \"C\"}\n");
}

TEST_F(ApplyInputTest, ADirectoryWithNothingToApplyOrABadFileIsRefused) {
  const fs::path d = dir_ / "none";
  fs::create_directories(d);
  std::ofstream(d / "readme.md") << "kind: A\n";
  std::ofstream(d / "blank.yaml") << "";
  auto got = ReadApplyInput(d.string());
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().message(),
            "-f " + d.string() +
                ": no .yaml, .yml or .json file in the directory holds anything: nothing to apply");
  std::ofstream(d / "bad.yaml", std::ios::binary) << "kind: A\nname: \xff\n";
  got = ReadApplyInput(d.string());
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().message(), "-f " + (d / "bad.yaml").string() +
                                        ": not UTF-8 text: byte 0xff at line 2, column 7 (YAML "
                                        "files must be UTF-8)");
  fs::remove(d / "bad.yaml");
  std::ofstream(d / "x.yaml") << std::string(60, '#') << "\n";
  std::ofstream(d / "y.yaml") << std::string(60, '#') << "\n";
  got = ReadApplyInput(d.string(), 100);
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.status().message().find("more than the 100 bytes one apply may carry"),
            std::string::npos)
      << got.status().message();
}

}  // namespace
}  // namespace trainlet::cli
