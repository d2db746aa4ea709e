// LogRotation (agent/step/log_rotation.h): a rank log past its cap is copied to <log>.1 and
// truncated, with a note where it was cut; what is written during the cut is kept; a writer holding
// the log O_APPEND goes on at the new end; a failure is said once while it repeats. On a temp dir;
// no processes.
#include "agent/step/log_rotation.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/common/test_dir.h"

namespace trainlet::step {
namespace {

namespace fs = std::filesystem;

std::string Read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(LogRotation, CutsALogPastItsCapWithANote) {
  testing::TempDir dir;
  const std::string log = dir.File("rank-0.log");
  const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);  // as a rank holds it
  ASSERT_GE(fd, 0);
  const std::string first(3000, 'x');
  ASSERT_EQ(write(fd, first.data(), first.size()), 3000);
  LogRotation rotation(1000);
  rotation.Watch(log);
  rotation.Watch("");  // a discarded log: ignored
  ASSERT_TRUE(rotation.enabled());
  EXPECT_TRUE(rotation.Check().empty());
  EXPECT_EQ(Read(log + ".1"), first);
  const std::string note = LogRotation::Note(3000, "rank-0.log.1");
  EXPECT_EQ(note, "[trainlet] log rotated at 3000 bytes, earlier output in rank-0.log.1\n");
  EXPECT_EQ(Read(log), note);
  // The rank writes on: at the new end, not at its old offset (no hole).
  ASSERT_EQ(write(fd, "tail\n", 5), 5);
  close(fd);
  EXPECT_EQ(Read(log), note + "tail\n");
  // Under the cap: left alone.
  EXPECT_TRUE(rotation.Check().empty());
  EXPECT_EQ(Read(log + ".1"), first);
}

TEST(LogRotation, WhatARankWritesWhileTheCopyIsPutInPlaceIsKept) {
  testing::TempDir dir;
  const std::string log = dir.File("rank-0.log");
  const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
  ASSERT_GE(fd, 0);
  const std::string first(3000, 'x');
  ASSERT_EQ(write(fd, first.data(), first.size()), 3000);
  EXPECT_EQ(LogRotation::Rotate(log, [fd] { ASSERT_EQ(write(fd, "late\n", 5), 5); }), "");
  EXPECT_EQ(Read(log + ".1"), first + "late\n") << "the line written mid-rotation is kept";
  EXPECT_EQ(Read(log), LogRotation::Note(3005, "rank-0.log.1"));
  ASSERT_EQ(write(fd, "next\n", 5), 5);
  close(fd);
  EXPECT_EQ(Read(log), LogRotation::Note(3005, "rank-0.log.1") + "next\n");
}

TEST(LogRotation, ALogWhoseWriterIsGoneIsNotCutAgain) {
  testing::TempDir dir;
  const std::string done = dir.File("rank-0.log");
  const std::string live = dir.File("rank-1.log");
  const std::string tail(3000, 'x');
  std::ofstream(done) << tail << "last-line\n";
  std::ofstream(live) << tail;
  LogRotation rotation(1000);
  rotation.Watch(done);
  rotation.Watch(live);
  rotation.Unwatch(done);  // its rank was reaped
  EXPECT_TRUE(rotation.Check().empty());
  EXPECT_EQ(Read(done), tail + "last-line\n") << "the tail stays where logs reads it";
  EXPECT_FALSE(fs::exists(done + ".1"));
  EXPECT_TRUE(fs::exists(live + ".1")) << "the other rank's log is still cut";
  rotation.Unwatch(live);
  EXPECT_FALSE(rotation.enabled());
}

TEST(LogRotation, NoCapDoesNothing) {
  testing::TempDir dir;
  const std::string log = dir.File("rank-0.log");
  std::ofstream(log) << std::string(5000, 'y');
  LogRotation off(0);
  off.Watch(log);
  EXPECT_FALSE(off.enabled());
  EXPECT_TRUE(off.Check().empty());
  EXPECT_EQ(fs::file_size(log), 5000u);
  EXPECT_FALSE(fs::exists(log + ".1"));
}

TEST(LogRotation, AFailureIsSaidOnceAndTheLogKept) {
  testing::TempDir dir;
  const std::string log = dir.File("rank-0.log");
  std::ofstream(log) << std::string(5000, 'z');
  fs::create_directories(log + ".1/blocker");  // <log>.1 cannot be replaced
  LogRotation rotation(1000);
  rotation.Watch(log);
  const auto first = rotation.Check();
  ASSERT_EQ(first.size(), 1u);
  EXPECT_NE(first[0].find("log rotation: "), std::string::npos) << first[0];
  EXPECT_TRUE(rotation.Check().empty());  // the same failure again: not said again
  EXPECT_EQ(fs::file_size(log), 5000u);   // nothing lost
  EXPECT_FALSE(fs::exists(log + ".1.tmp"));
}

}  // namespace
}  // namespace trainlet::step
