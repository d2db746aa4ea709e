// SpareFiles and SpareFileFiller (agent/step/spare_files.h): the filler makes empty private files
// ahead of need, up to what was asked; a rank's log is one of them, renamed, keeping its inode; an
// existing log is never replaced; two takers never get the same file. On a temp dir; no processes.
#include "agent/step/spare_files.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "tests/common/test_dir.h"

namespace trainlet::step {
namespace {

namespace fs = std::filesystem;

size_t CountFiles(const std::string& dir) {
  size_t n = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.is_regular_file()) ++n;
  }
  return n;
}

ino_t Inode(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 ? st.st_ino : 0;
}

#ifdef __linux__

TEST(SpareFileFiller, MakesWhatWasAskedPrivateAndEmptyAndNoMore) {
  testing::TempDir dir;
  testing::ScopedUmask loose(0);  // the files are private by their own mode
  const std::string spare = dir.File("spare-files");
  {
    SpareFileFiller filler(spare, /*max_files=*/10);
    filler.WaitIdle();
    EXPECT_FALSE(fs::exists(spare));  // nothing until asked
    filler.Want(4);
    filler.WaitIdle();
    EXPECT_EQ(filler.Error(), "");
    EXPECT_EQ(CountFiles(spare), 4u);
    EXPECT_EQ(filler.Made(), 4u);
    filler.Want(2);  // fewer than held: nothing to make
    filler.WaitIdle();
    EXPECT_EQ(filler.Made(), 4u);
    filler.Want(50);  // capped
    filler.WaitIdle();
    EXPECT_EQ(CountFiles(spare), 10u);
  }
  EXPECT_EQ(fs::status(spare).permissions() & fs::perms::all, fs::perms::owner_all);
  for (const auto& e : fs::directory_iterator(spare)) {
    if (!e.is_regular_file()) continue;
    EXPECT_EQ(e.file_size(), 0u) << e.path();
    EXPECT_EQ(fs::status(e.path()).permissions() & fs::perms::all,
              fs::perms::owner_read | fs::perms::owner_write)
        << e.path();
  }
}

TEST(SpareFiles, ARankLogIsASpareRenamedAndTheSpareIsGone) {
  testing::TempDir dir;
  const std::string spare = dir.File("spare-files");
  SpareFileFiller filler(spare);
  filler.Want(2);
  filler.WaitIdle();
  std::set<ino_t> spares;
  for (const auto& e : fs::directory_iterator(spare)) {
    if (e.is_regular_file()) spares.insert(Inode(e.path().string()));
  }
  ASSERT_EQ(spares.size(), 2u);

  SpareFiles taker(spare);
  const std::string log = dir.File("logs/job/rank-0.log");
  Result<int> fd = OpenRankLog(log, /*create_parent=*/true, &taker);
  ASSERT_TRUE(fd.ok()) << fd.status().message();
  ASSERT_EQ(write(*fd, "hello\n", 6), 6);
  close(*fd);
  EXPECT_TRUE(spares.contains(Inode(log)));  // the inode made ahead, not a new one
  EXPECT_EQ(CountFiles(spare), 1u);
  std::ifstream in(log);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(), "hello\n");
}

// The ranks of one log dir: the dir is opened once and each log taken and opened relative to it;
// each log is a spare, and a log that exists (an earlier attempt's) is appended to, not replaced.
TEST(SpareFiles, RankLogsOfOneDirAreTakenThroughItsOpenDir) {
  testing::TempDir dir;
  const std::string spare = dir.File("spare-files");
  SpareFileFiller filler(spare);
  filler.Want(3);
  filler.WaitIdle();
  std::set<ino_t> spares;
  for (const auto& e : fs::directory_iterator(spare)) {
    if (e.is_regular_file()) spares.insert(Inode(e.path().string()));
  }
  ASSERT_EQ(spares.size(), 3u);
  fs::create_directories(dir.File("logs/job/attempt-1"));
  const std::string old_log = dir.File("logs/job/attempt-1/rank-2.log");
  std::ofstream(old_log) << "before\n";
  SpareFiles taker(spare);
  int parent_fd = -1;
  for (int rank = 0; rank < 3; ++rank) {
    const std::string log = dir.File("logs/job/attempt-1/rank-" + std::to_string(rank) + ".log");
    Result<int> fd = OpenRankLog(log, /*create_parent=*/rank == 0, &taker, &parent_fd);
    ASSERT_TRUE(fd.ok()) << fd.status().message();
    EXPECT_GT(*fd, STDERR_FILENO);
    ASSERT_EQ(write(*fd, "x\n", 2), 2);
    close(*fd);
    EXPECT_EQ(spares.contains(Inode(log)), rank != 2) << log;
  }
  ASSERT_GE(parent_fd, 0);
  close(parent_fd);
  EXPECT_EQ(CountFiles(spare), 1u);  // the one rank 2 did not take
  std::ifstream in(old_log);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(), "before\nx\n");
}

// Spare dirs: the filler makes empty 0700 dirs apart from the files (under .dirs, which a file
// taker never lists); a launch's private dir is one of them, renamed; a path that exists (a dir,
// or a link a rank left) is never replaced, and is then made or checked as before.
TEST(SpareFiles, APrivateDirIsASpareDirRenamedAndNothingIsReplaced) {
  testing::TempDir dir;
  const std::string spare = dir.File("spare-files");
  SpareFileFiller filler(spare);
  filler.Want(1, 2);
  filler.WaitIdle();
  EXPECT_EQ(filler.Error(), "");
  EXPECT_EQ(CountFiles(spare), 1u);
  std::set<ino_t> dirs;
  for (const auto& e : fs::directory_iterator(spare + "/.dirs")) {
    ASSERT_TRUE(e.is_directory());
    EXPECT_EQ(e.status().permissions() & fs::perms::all, static_cast<fs::perms>(0700));
    dirs.insert(Inode(e.path().string()));
  }
  ASSERT_EQ(dirs.size(), 2u);

  SpareFiles taker(spare);
  const std::string work = dir.File("work/job");
  fs::create_directories(dir.File("work"));
  ASSERT_TRUE(MakePrivateDirectoryFromSpare(work, &taker).ok());
  EXPECT_TRUE(dirs.contains(Inode(work)));  // made ahead
  EXPECT_EQ(fs::status(work).permissions() & fs::perms::all, static_cast<fs::perms>(0700));
  ASSERT_TRUE(MakePrivateDirectoryFromSpare(work, &taker).ok());  // exists: kept, spare kept
  EXPECT_TRUE(dirs.contains(Inode(work)));
  EXPECT_EQ(CountFiles(spare), 1u);  // a file taker's list holds no dir
  size_t left = 0;
  for (const auto& e : fs::directory_iterator(spare + "/.dirs")) left += e.is_directory();
  EXPECT_EQ(left, 1u);
  // A link where the dir should be is never replaced by a spare.
  fs::create_directories(dir.File("elsewhere"));
  fs::create_directory_symlink(dir.File("elsewhere"), work + "/workspace");
  EXPECT_FALSE(taker.TakeDirAs(work + "/workspace"));
  EXPECT_TRUE(fs::is_symlink(work + "/workspace"));
  // No parent: not taken, made with its parents as before.
  const std::string deep = dir.File("a/b/c");
  ASSERT_TRUE(MakePrivateDirectoryFromSpare(deep, &taker).ok());
  EXPECT_TRUE(fs::is_directory(deep));
  EXPECT_FALSE(dirs.contains(Inode(deep)));
}

TEST(SpareFiles, AnExistingLogIsAppendedToAndKeepsTheSpare) {
  testing::TempDir dir;
  const std::string spare = dir.File("spare-files");
  SpareFileFiller filler(spare);
  filler.Want(1);
  filler.WaitIdle();
  const std::string log = dir.File("rank-0.log");
  std::ofstream(log) << "attempt 1\n";
  const ino_t before = Inode(log);
  SpareFiles taker(spare);
  EXPECT_FALSE(taker.TakeAs(log));
  Result<int> fd = OpenRankLog(log, false, &taker);
  ASSERT_TRUE(fd.ok());
  ASSERT_EQ(write(*fd, "attempt 2\n", 10), 10);
  close(*fd);
  EXPECT_EQ(Inode(log), before);
  EXPECT_EQ(fs::file_size(log), 20u);
  EXPECT_EQ(CountFiles(spare), 1u);
}

TEST(SpareFiles, TwoTakersNeverGetTheSameFileAndRunOutCleanly) {
  testing::TempDir dir;
  const std::string spare = dir.File("spare-files");
  SpareFileFiller filler(spare);
  filler.Want(3);
  filler.WaitIdle();
  SpareFiles a(spare);
  SpareFiles b(spare);  // both list the same three names
  std::set<ino_t> got;
  int taken = 0;
  for (int i = 0; i < 3; ++i) {
    for (SpareFiles* t : {&a, &b}) {
      const std::string log = dir.File("log-" + std::to_string(taken) + "-" + std::to_string(i));
      if (t->TakeAs(log)) {
        ++taken;
        got.insert(Inode(log));
      }
    }
  }
  EXPECT_EQ(taken, 3);
  EXPECT_EQ(got.size(), 3u);
  EXPECT_EQ(CountFiles(spare), 0u);
  // None left: the log is created as before.
  Result<int> fd = OpenRankLog(dir.File("late.log"), false, &a);
  ASSERT_TRUE(fd.ok());
  close(*fd);
  EXPECT_TRUE(fs::exists(dir.File("late.log")));
}

// The first rank's log dir (logs/<job>/attempt-N, new for each attempt) is a spare dir renamed
// into place, not an inode allocated while the launch waits; an existing one is kept, and the
// spare with it.
TEST(SpareFiles, ANewRankLogDirIsASpareDirAndAnExistingOneIsKept) {
  testing::TempDir dir;
  const std::string spare = dir.File("spare-files");
  SpareFileFiller filler(spare);
  filler.Want(2, 2);
  filler.WaitIdle();
  std::set<ino_t> dirs;
  for (const auto& e : fs::directory_iterator(spare + "/.dirs"))
    dirs.insert(Inode(e.path().string()));
  ASSERT_EQ(dirs.size(), 2u);
  fs::create_directories(dir.File("logs/job"));

  SpareFiles taker(spare);
  const std::string attempt = dir.File("logs/job/attempt-1");
  Result<int> fd = OpenRankLog(attempt + "/rank-0.log", /*create_parent=*/true, &taker);
  ASSERT_TRUE(fd.ok()) << fd.status().message();
  close(*fd);
  EXPECT_TRUE(dirs.contains(Inode(attempt)));                                 // made ahead
  fd = OpenRankLog(attempt + "/rank-1.log", /*create_parent=*/true, &taker);  // exists: kept
  ASSERT_TRUE(fd.ok()) << fd.status().message();
  close(*fd);
  EXPECT_TRUE(fs::exists(attempt + "/rank-0.log"));
  size_t left = 0;
  for (const auto& e : fs::directory_iterator(spare + "/.dirs")) left += e.is_directory();
  EXPECT_EQ(left, 1u);
  // No parent for it: made with its parents as before, the spare kept.
  fd = OpenRankLog(dir.File("other/job/attempt-1/rank-0.log"), /*create_parent=*/true, &taker);
  ASSERT_TRUE(fd.ok()) << fd.status().message();
  close(*fd);
  EXPECT_FALSE(dirs.contains(Inode(dir.File("other/job/attempt-1"))));
}

TEST(SpareFiles, NoDirOrAMissingLogDirTakesNothingAndKeepsTheSpares) {
  testing::TempDir dir;
  SpareFiles none("");
  EXPECT_FALSE(none.TakeAs(dir.File("x.log")));
  SpareFiles missing(dir.File("no-such-dir"));
  EXPECT_FALSE(missing.TakeAs(dir.File("x.log")));

  const std::string spare = dir.File("spare-files");
  SpareFileFiller filler(spare);
  filler.Want(2);
  filler.WaitIdle();
  SpareFiles taker(spare);
  EXPECT_FALSE(taker.TakeAs(dir.File("no-parent/x.log")));
  EXPECT_EQ(CountFiles(spare), 2u);
  EXPECT_TRUE(taker.TakeAs(dir.File("x.log")));  // still there for the next
}

TEST(SpareFileFiller, FilesLeftInTheFillDirBecomeSpares) {
  testing::TempDir dir;
  const std::string spare = dir.File("spare-files");
  fs::create_directories(spare + "/.fill");
  std::ofstream(spare + "/.fill/left-1");  // an agent stopped between make and rename
  SpareFileFiller filler(spare);
  filler.Want(3);
  filler.WaitIdle();
  EXPECT_EQ(CountFiles(spare), 3u);
  EXPECT_EQ(filler.Made(), 2u);
  EXPECT_EQ(CountFiles(spare + "/.fill"), 0u);
}

#endif  // __linux__

}  // namespace
}  // namespace trainlet::step
