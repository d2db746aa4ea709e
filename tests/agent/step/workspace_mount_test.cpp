// The job's workspace for a step's ranks (agent/step/workspace_mount.h): which ranks' env moves to
// /workspace, the note the agent reads back, and, as root, a private mount namespace that binds
// the workspace for this process only (in a forked child, so the test process keeps its own).
// Then the whole path through a real trainlet-step: a rank sees the env and the bound dir.
#include "agent/step/workspace_mount.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "agent/step/spare_files.h"
#include "agent/worker_supervisor.h"
#include "tests/common/supervisor_fixture.h"
#include "tests/common/test_dir.h"

namespace trainlet::step {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

StepRank RankIn(uint32_t rank, const std::string& workspace) {
  StepRank r;
  r.rank = rank;
  r.argv = {"/bin/true"};
  if (!workspace.empty()) {
    r.env["TRAINLET_WORKSPACE"] = workspace;
    r.env["TRAINLET_DATASET_DIR"] = workspace + "/dataset";
    r.env["TRAINLET_MODEL_DIR"] = workspace + "/model";
  }
  return r;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs `body` in a forked child and returns its exit status (0: every check in it held).
template <typename F>
int InChild(F body) {
  const pid_t pid = fork();
  if (pid == 0) _exit(body());
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST(WorkspaceMount, TheLaunchNamesOneWorkspaceOrNone) {
  StepLaunch launch;
  EXPECT_EQ(LaunchWorkspace(launch), "");
  launch.ranks = {RankIn(0, "/s/work/j/workspace"), RankIn(1, "/s/work/j/workspace")};
  EXPECT_EQ(LaunchWorkspace(launch), "/s/work/j/workspace");
  launch.ranks.push_back(RankIn(2, ""));  // an older agent's rank: no workspace at all
  EXPECT_EQ(LaunchWorkspace(launch), "");
  launch.ranks.back() = RankIn(2, "/other");
  EXPECT_EQ(LaunchWorkspace(launch), "");
}

TEST(WorkspaceMount, RanksOfTheWorkspacePointAtTheMount) {
  StepLaunch launch;
  launch.ranks = {RankIn(0, "/s/ws"), RankIn(1, "/other/ws")};
  PointRanksAtMount(launch, "/s/ws");
  EXPECT_EQ(launch.ranks[0].env.at("TRAINLET_DATASET_DIR"), "/workspace/dataset");
  EXPECT_EQ(launch.ranks[0].env.at("TRAINLET_MODEL_DIR"), "/workspace/model");
  EXPECT_EQ(launch.ranks[0].env.at("TRAINLET_WORKSPACE"), "/s/ws");  // the real dir, as given
  EXPECT_EQ(launch.ranks[1].env.at("TRAINLET_DATASET_DIR"), "/other/ws/dataset");
  EXPECT_EQ(MountedDescription(), "/workspace (private mount namespace)");
  EXPECT_EQ(EnvDescription("/s/ws"), "TRAINLET_WORKSPACE=/s/ws");
}

TEST(WorkspaceMount, NoWorkspaceNoNote) {
  testing::TempDir dir;
  StepLaunch launch;
  launch.ranks = {RankIn(0, "")};
  std::string why;
  EXPECT_EQ(ApplyWorkspace(dir.path(), launch, &why), "");
  EXPECT_EQ(ReadWorkspaceNote(dir.path()), "");
  EXPECT_FALSE(launch.ranks[0].env.contains("TRAINLET_DATASET_DIR"));
}

TEST(WorkspaceMount, ApplyPicksTheModeAndLeavesTheNote) {
  testing::TempDir dir;
  const std::string ws = dir.path() + "/work/workspace";
  const std::string step_dir = dir.path() + "/step";
  fs::create_directories(ws + "/dataset");
  fs::create_directories(step_dir);
  std::ofstream(ws + "/dataset/marker") << "data";
  const bool root = geteuid() == 0;
  const int status = InChild([&] {
    StepLaunch launch;
    launch.ranks = {RankIn(0, ws)};
    std::string why;
    const std::string said = ApplyWorkspace(step_dir, launch, &why);
    const std::string dataset = launch.ranks[0].env.at("TRAINLET_DATASET_DIR");
    if (root) {
      if (said != MountedDescription() || dataset != "/workspace/dataset" || !why.empty()) return 1;
      if (ReadFile("/workspace/dataset/marker") != "data") return 2;
    } else if (said != EnvDescription(ws) || dataset != ws + "/dataset" || why != "not root") {
      return 3;
    }
    return 0;
  });
  EXPECT_EQ(status, 0);
  EXPECT_EQ(ReadWorkspaceNote(step_dir), root ? MountedDescription() : EnvDescription(ws));
  if (root) {
    // The host's /workspace never saw the bind.
    EXPECT_FALSE(fs::exists("/workspace/dataset/marker") &&
                 fs::equivalent("/workspace/dataset/marker", ws + "/dataset/marker"));
  }
}

// The note is written through a spare file where one waits (agent/step/spare_files.h): the same
// inode, no new one before the first rank starts.
TEST(WorkspaceMount, TheNoteIsASpareFile) {
  testing::TempDir dir;
  const std::string ws = dir.path() + "/work/workspace";
  const std::string step_dir = dir.path() + "/step";
  const std::string spare = dir.path() + "/spare-files";
  fs::create_directories(ws);
  fs::create_directories(step_dir);
  SpareFileFiller filler(spare);
  filler.Want(1);
  filler.WaitIdle();
  struct stat st {};
  ino_t made = 0;
  for (const auto& e : fs::directory_iterator(spare)) {
    if (e.is_regular_file() && stat(e.path().c_str(), &st) == 0) made = st.st_ino;
  }
  ASSERT_NE(made, 0u);
  const int status = InChild([&] {
    StepLaunch launch;
    launch.ranks = {RankIn(0, ws)};
    std::string why;
    SpareFiles spares(spare);
    ApplyWorkspace(step_dir, launch, &why, &spares);
    return 0;
  });
  EXPECT_EQ(status, 0);
  EXPECT_EQ(ReadWorkspaceNote(step_dir),
            geteuid() == 0 ? MountedDescription() : EnvDescription(ws));
  ASSERT_EQ(stat((step_dir + "/workspace").c_str(), &st), 0);
  EXPECT_EQ(st.st_ino, made);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
}

TEST(WorkspaceMount, ThePrivateNamespaceBindsForThisProcessOnly) {
  if (geteuid() != 0) GTEST_SKIP() << "mount namespaces need root";
  testing::TempDir dir;
  const std::string ws = dir.path() + "/ws";
  const std::string mount_point = dir.path() + "/mnt";
  fs::create_directories(ws + "/model");
  std::ofstream(ws + "/model/weights") << "w";
  const int status = InChild([&] {
    if (!EnterWorkspaceNamespace(ws, mount_point).ok()) return 1;
    if (ReadFile(mount_point + "/model/weights") != "w") return 2;
    // A child of this process (a rank) is in the same namespace.
    return InChild([&] { return ReadFile(mount_point + "/model/weights") == "w" ? 0 : 4; });
  });
  EXPECT_EQ(status, 0);
  ASSERT_TRUE(fs::is_directory(mount_point)) << "created when missing";
  EXPECT_TRUE(fs::is_empty(mount_point)) << "the bind stayed in the child's namespace";
  EXPECT_EQ(ReadFile("/proc/self/mountinfo").find(mount_point), std::string::npos);
  // Failures are errors, never a half-made namespace for this process.
  EXPECT_EQ(InChild([&] {
              return EnterWorkspaceNamespace(dir.path() + "/missing", mount_point).ok() ? 1 : 0;
            }),
            0);
  std::ofstream(dir.path() + "/file-not-dir") << "x";
  EXPECT_EQ(InChild([&] {
              return EnterWorkspaceNamespace(ws, dir.path() + "/file-not-dir").ok() ? 1 : 0;
            }),
            0);
}

class StepWorkspaceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { trainlet::testing::BlockAgentSignals(); }
};

// Through a real trainlet-step: the rank sees TRAINLET_DATASET_DIR and the files in it, and the
// supervisor reads back the mode the step used (the STARTED event's workspace).
TEST_F(StepWorkspaceTest, ARankSeesItsWorkspaceAndTheModeIsReported) {
  trainlet::testing::TempDir dir;
  const std::string ws = dir.path() + "/work/job-w/workspace";
  fs::create_directories(ws + "/dataset");
  fs::create_directories(ws + "/model");
  std::ofstream(ws + "/dataset/marker") << "from the initializer";
  auto spawner = agent::MakePosixProcessSpawner();
  agent::WorkerSupervisor sup(spawner.get(), {"PATH=/usr/bin:/bin"},
                              trainlet::testing::StepOptionsUnder(dir.path()));
  agent::WorkerLaunch l;
  l.job = "job-w";
  l.attempt = 1;
  l.argv = {"/bin/sh", "-c", "echo $TRAINLET_DATASET_DIR; cat $TRAINLET_DATASET_DIR/marker"};
  l.env = {{"TRAINLET_WORKSPACE", ws},
           {"TRAINLET_DATASET_DIR", ws + "/dataset"},
           {"TRAINLET_MODEL_DIR", ws + "/model"}};
  l.log_path = dir.path() + "/rank-0.log";
  auto started = sup.StartStep({l}, 1s);
  ASSERT_TRUE(started[0].ok()) << started[0].status().message();
  const bool root = geteuid() == 0;
  EXPECT_EQ(sup.StepWorkspace("job-w", 1), root ? MountedDescription() : EnvDescription(ws));
  EXPECT_EQ(sup.StepWorkspace("job-w", 2), "");
  std::vector<agent::WorkerExit> exits;
  for (auto deadline = std::chrono::steady_clock::now() + 10s;
       exits.empty() && std::chrono::steady_clock::now() < deadline;) {
    exits = sup.Reap();
    std::this_thread::sleep_for(2ms);
  }
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_EQ(exits[0].exit_code, 0);
  EXPECT_EQ(ReadFile(l.log_path), (root ? std::string("/workspace/dataset") : ws + "/dataset") +
                                      "\nfrom the initializer");
  sup.KillAllAndWait(5s);
}

}  // namespace
}  // namespace trainlet::step
