// Issue 18, "Working directory": how WorkerSpec.cwd becomes a rank's directory on the node (the
// job's work dir, a relative or absolute workingDir, the job's directory under shared_dir), and
// which directories the agent makes or refuses before the ranks start.
#include "agent/working_dirs.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "tests/common/test_dir.h"

namespace trainlet::agent {
namespace {
namespace fs = std::filesystem;

TEST(ResolveWorkerCwd, EmptyIsTheWorkDir) {
  EXPECT_EQ(ResolveWorkerCwd("", "/state/work/j", ""), "/state/work/j");
  EXPECT_EQ(ResolveWorkerCwd("", "/state/work/j", "/shared/j"), "/state/work/j");
}

TEST(ResolveWorkerCwd, RelativeGoesUnderTheWorkDirAbsoluteStays) {
  EXPECT_EQ(ResolveWorkerCwd("out/run", "/state/work/j", ""), "/state/work/j/out/run");
  EXPECT_EQ(ResolveWorkerCwd("/srv/data", "/state/work/j", "/shared/j"), "/srv/data");
}

TEST(ResolveWorkerCwd, TheSharedVariableIsTheJobsSharedDir) {
  EXPECT_EQ(ResolveWorkerCwd("$(TRAINLET_SHARED_WORK_DIR)", "/w", "/shared/j"), "/shared/j");
  EXPECT_EQ(ResolveWorkerCwd("$(TRAINLET_SHARED_WORK_DIR)/out", "/w", "/shared/j"),
            "/shared/j/out");
  // No shared_dir on this node: left as written, for PrepareWorkerCwds to refuse.
  EXPECT_EQ(ResolveWorkerCwd("$(TRAINLET_SHARED_WORK_DIR)", "/w", ""),
            "$(TRAINLET_SHARED_WORK_DIR)");
}

TEST(SharedWorkDir, IsTheJobUnderTheSharedDir) {
  EXPECT_EQ(SharedWorkDir("/mnt/shared/trainlet/", "team.train"),
            "/mnt/shared/trainlet/team.train");
  EXPECT_EQ(SharedWorkDir("", "train"), "");
}

TEST(PrepareWorkerCwds, MakesTheSharedJobDirPrivateAndRelativeDirs) {
  testing::TempDir dir;
  testing::ScopedUmask umask(0);
  const std::string work = dir.File("work/j");
  fs::create_directories(work);
  fs::create_directories(dir.File("shared"));
  const std::string shared = SharedWorkDir(dir.File("shared"), "j");
  WorkerCwdContext ctx{"node-a", work, shared};
  ASSERT_TRUE(PrepareWorkerCwds({shared + "/out", work + "/rel"}, ctx).ok());
  struct stat st {};
  ASSERT_EQ(::stat(shared.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  EXPECT_TRUE(fs::is_directory(shared + "/out"));
  EXPECT_TRUE(fs::is_directory(work + "/rel"));
}

TEST(PrepareWorkerCwds, AMissingAbsoluteWorkingDirIsNamed) {
  testing::TempDir dir;
  WorkerCwdContext ctx{"node-a", dir.File("work"), ""};  // the paths below are outside it
  Status s = PrepareWorkerCwds({dir.File("nope")}, ctx);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "node node-a: working directory " + dir.File("nope") +
                             " (the container's workingDir): no such directory");
  std::ofstream(dir.File("file")) << "x";
  s = PrepareWorkerCwds({dir.File("file")}, ctx);
  EXPECT_NE(s.message().find("not a directory"), std::string::npos) << s.message();
  // An existing absolute directory is used as is.
  EXPECT_TRUE(PrepareWorkerCwds({dir.path()}, ctx).ok());
}

TEST(PrepareWorkerCwds, SharedWithoutASharedDirNamesTheNodeAndTheKey) {
  WorkerCwdContext ctx{"node-b", "/w", ""};
  Status s = PrepareWorkerCwds({ResolveWorkerCwd("$(TRAINLET_SHARED_WORK_DIR)", "/w", "")}, ctx);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(),
            "node node-b has no shared directory: the job asks for trainlet.io/working-dir: "
            "shared, and this node's agent config sets no shared_dir");
}

// An agent restarted while ranks of another user run keeps the search bit the step gave its state
// dir (0711), so they still reach their work dir; a dir given looser is still made 0700 exactly.
TEST(MakeStateDirPrivate, KeepsSearchAloneAndTightensTheRest) {
  testing::TempDir dir;
  testing::ScopedUmask umask(0);
  auto mode_of = [](const std::string& p) {
    struct stat st {};
    EXPECT_EQ(::stat(p.c_str(), &st), 0) << p;
    return st.st_mode & 07777;
  };
  bool tightened = true;
  const std::string fresh = dir.File("fresh");
  ASSERT_TRUE(MakeStateDirPrivate(fresh, &tightened).ok());
  EXPECT_EQ(mode_of(fresh), 0700u);
  EXPECT_FALSE(tightened);

  const std::string opened = dir.File("opened");
  fs::create_directories(opened);
  ::chmod(opened.c_str(), 0711);
  ASSERT_TRUE(MakeStateDirPrivate(opened, &tightened).ok());
  EXPECT_EQ(mode_of(opened), 0711u);
  EXPECT_FALSE(tightened);

  const std::string loose = dir.File("loose");
  fs::create_directories(loose);
  ::chmod(loose.c_str(), 0755);
  ASSERT_TRUE(MakeStateDirPrivate(loose, &tightened).ok());
  EXPECT_EQ(mode_of(loose), 0700u);
  EXPECT_TRUE(tightened);
}

}  // namespace
}  // namespace trainlet::agent
