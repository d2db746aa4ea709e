// An exec session's files: the record a restarted agent resumes from, and OutputTail, which hands
// over what a process appended to its output file, with offsets, from any starting point.
#include "agent/exec_output_files.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "tests/common/test_dir.h"

namespace trainlet::agent {
namespace {

namespace fs = std::filesystem;

class ExecOutputFilesTest : public ::testing::Test {
 protected:
  void Append(const std::string& path, const std::string& bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::app);
    out << bytes;
  }

  // Every chunk ReadNew emits, as (offset, data).
  std::vector<std::pair<uint64_t, std::string>> Read(OutputTail& tail) {
    std::vector<std::pair<uint64_t, std::string>> got;
    Status s = tail.ReadNew([&](uint64_t offset, std::string_view data) {
      got.emplace_back(offset, std::string(data));
    });
    EXPECT_TRUE(s.ok()) << s.message();
    return got;
  }

  testing::TempDir tmp_;
  const fs::path dir_ = tmp_.path();
};

ExecSessionRecord Sample() {
  ExecSessionRecord r;
  r.exec_id = (uint64_t{1} << 60) + 7;  // ids are large: they start from the wall clock
  r.job = "mpi-job";
  r.attempt = 3;
  r.rank = (1u << 30) + 2;
  r.grace_ms = 2500;
  r.acked_stdout = 123456789012ull;
  r.acked_stderr = 42;
  return r;
}

TEST_F(ExecOutputFilesTest, RecordRoundTripsThroughItsFile) {
  const std::string path = (dir_ / "session.json").string();
  ASSERT_TRUE(WriteExecRecord(path, Sample()).ok());
  auto back = ReadExecRecord(path);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(*back, Sample());
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  EXPECT_EQ(fs::status(path).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write);
  // Rewritten with new counts, as each acknowledgement does.
  ExecSessionRecord later = Sample();
  later.acked_stdout += 10;
  ASSERT_TRUE(WriteExecRecord(path, later).ok());
  EXPECT_EQ(ReadExecRecord(path)->acked_stdout, Sample().acked_stdout + 10);
}

TEST_F(ExecOutputFilesTest, BadRecordsAreRefusedNamingTheField) {
  auto missing = ReadExecRecord((dir_ / "none.json").string());
  EXPECT_EQ(missing.status().code(), ErrorCode::kNotFound);
  EXPECT_NE(missing.status().message().find("none.json"), std::string::npos);

  EXPECT_NE(DecodeExecRecord("{").status().message().find("not valid JSON"), std::string::npos);
  std::string text = EncodeExecRecord(Sample());
  auto without = [&](const std::string& field) {
    nlohmann::json doc = nlohmann::json::parse(text);
    doc.erase(field);
    return DecodeExecRecord(doc.dump()).status().message();
  };
  EXPECT_NE(without("acked_stderr").find("acked_stderr: missing"), std::string::npos);
  EXPECT_NE(without("job").find("job"), std::string::npos);
  nlohmann::json doc = nlohmann::json::parse(text);
  doc["attempt"] = 0;
  EXPECT_NE(DecodeExecRecord(doc.dump()).status().message().find("attempt"), std::string::npos);
  doc = nlohmann::json::parse(text);
  doc["rank"] = -1;
  EXPECT_NE(DecodeExecRecord(doc.dump()).status().message().find("rank"), std::string::npos);
  doc = nlohmann::json::parse(text);
  doc["attempt"] = uint64_t{1} << 33;
  EXPECT_NE(DecodeExecRecord(doc.dump()).status().message().find("attempt: out of range"),
            std::string::npos);
  doc = nlohmann::json::parse(text);
  doc["version"] = 2;
  EXPECT_NE(DecodeExecRecord(doc.dump()).status().message().find("version"), std::string::npos);

  const std::string path = (dir_ / "bad.json").string();
  Append(path, "not json");
  auto bad = ReadExecRecord(path);
  EXPECT_EQ(bad.status().code(), ErrorCode::kInvalid);
  EXPECT_NE(bad.status().message().find("bad.json"), std::string::npos);
}

TEST_F(ExecOutputFilesTest, TailHandsOverAppendedBytesWithTheirOffsets) {
  const std::string path = (dir_ / "stdout").string();
  Append(path, "");
  OutputTail tail;
  ASSERT_TRUE(tail.Open(path, 0).ok());
  EXPECT_TRUE(Read(tail).empty());
  Append(path, "hello ");
  Append(path, "world\n");
  auto got = Read(tail);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0], std::make_pair(uint64_t{0}, std::string("hello world\n")));
  EXPECT_TRUE(Read(tail).empty());  // nothing new, nothing repeated
  Append(path, "more");
  got = Read(tail);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0], std::make_pair(uint64_t{12}, std::string("more")));
  EXPECT_EQ(tail.offset(), 16u);
}

TEST_F(ExecOutputFilesTest, TailResumesFromAnOffsetAsARestartedAgentDoes) {
  const std::string path = (dir_ / "stderr").string();
  Append(path, "0123456789");
  OutputTail tail;
  ASSERT_TRUE(tail.Open(path, 4).ok());  // the coordinator acknowledged 4 bytes
  auto got = Read(tail);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0], std::make_pair(uint64_t{4}, std::string("456789")));
  // Moved: the descriptor and the position go along.
  OutputTail moved = std::move(tail);
  EXPECT_FALSE(tail.is_open());
  Append(path, "ab");
  got = Read(moved);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0], std::make_pair(uint64_t{10}, std::string("ab")));
}

TEST_F(ExecOutputFilesTest, LargeOutputComesInBoundedChunksInOrder) {
  const std::string path = (dir_ / "big").string();
  std::string big;
  for (size_t i = 0; i < OutputTail::kChunkBytes * 2 + 100; ++i) big.push_back(char('a' + i % 26));
  Append(path, big);
  OutputTail tail;
  ASSERT_TRUE(tail.Open(path, 0).ok());
  auto got = Read(tail);
  ASSERT_EQ(got.size(), 3u);
  std::string joined;
  for (const auto& [offset, data] : got) {
    EXPECT_EQ(offset, joined.size());
    EXPECT_LE(data.size(), OutputTail::kChunkBytes);
    joined += data;
  }
  EXPECT_EQ(joined, big);
}

TEST_F(ExecOutputFilesTest, OpeningAMissingFileNamesIt) {
  OutputTail tail;
  Status s = tail.Open((dir_ / "gone").string(), 0);
  EXPECT_EQ(s.code(), ErrorCode::kIo);
  EXPECT_NE(s.message().find("gone"), std::string::npos);
  EXPECT_FALSE(tail.ReadNew([](uint64_t, std::string_view) {}).ok());
}

}  // namespace
}  // namespace trainlet::agent
