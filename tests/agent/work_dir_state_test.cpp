// Issue 18: what a node's work dir holds before a restart (the attempt stamp, the checkpoint's
// size and sampled digest), which the coordinator compares across nodes.
#include "agent/work_dir_state.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "tests/common/test_dir.h"

namespace trainlet::agent {
namespace {
namespace fs = std::filesystem;

TEST(ReadWorkDirState, ReportsTheStampAndTheCheckpoint) {
  testing::TempDir dir;
  v1::WorkDirState s = ReadWorkDirState(dir.path(), "snapshot.pt");
  EXPECT_EQ(s.last_attempt(), 0u);  // no attempt ran here
  EXPECT_EQ(s.checkpoint(), dir.File("snapshot.pt"));
  EXPECT_FALSE(s.checkpoint_exists());

  ASSERT_TRUE(StampAttempt(dir.path(), "train", 3, "node-a").ok());
  std::ofstream(dir.File("snapshot.pt"), std::ios::binary) << "epoch 10";
  s = ReadWorkDirState(dir.path(), "snapshot.pt");
  EXPECT_EQ(s.last_attempt(), 3u);
  EXPECT_TRUE(s.checkpoint_exists());
  EXPECT_EQ(s.checkpoint_bytes(), 8u);
  EXPECT_EQ(s.checkpoint_sha256().size(), 64u);
  EXPECT_GT(s.checkpoint_mtime_ms(), 0);
  EXPECT_EQ(s.error(), "");

  // The same content elsewhere digests the same; other content does not.
  testing::TempDir other;
  std::ofstream(other.File("snapshot.pt"), std::ios::binary) << "epoch 10";
  EXPECT_EQ(ReadWorkDirState(other.path(), "snapshot.pt").checkpoint_sha256(),
            s.checkpoint_sha256());
  std::ofstream(other.File("snapshot.pt"), std::ios::binary) << "epoch 00";
  EXPECT_NE(ReadWorkDirState(other.path(), "snapshot.pt").checkpoint_sha256(),
            s.checkpoint_sha256());
}

TEST(ReadWorkDirState, ADirectoryCheckpointCoversItsFilesAndBigFilesAreSampled) {
  testing::TempDir dir;
  fs::create_directories(dir.File("ckpt/sub"));
  std::ofstream(dir.File("ckpt/a"), std::ios::binary) << "aa";
  std::ofstream(dir.File("ckpt/sub/b"), std::ios::binary) << std::string(3 << 20, 'b');
  v1::WorkDirState s = ReadWorkDirState(dir.path(), "ckpt");
  EXPECT_TRUE(s.checkpoint_exists());
  EXPECT_EQ(s.checkpoint_bytes(), 2u + (3u << 20));
  const std::string before = s.checkpoint_sha256();
  // A change in the last MiB of the big file is seen.
  {
    std::fstream f(dir.File("ckpt/sub/b"), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp((3 << 20) - 1);
    f << 'x';
  }
  EXPECT_NE(ReadWorkDirState(dir.path(), "ckpt").checkpoint_sha256(), before);
  // An absolute checkpoint path is used as is.
  EXPECT_EQ(ReadWorkDirState("/nowhere", dir.File("ckpt")).checkpoint_bytes(), 2u + (3u << 20));
}

}  // namespace
}  // namespace trainlet::agent
