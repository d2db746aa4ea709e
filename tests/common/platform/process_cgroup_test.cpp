// ProcessCgroup: finding the hierarchies and the caller's place in them from the kernel's text
// (pure, with the layouts trainlet runs on: hybrid v1 + unified, pure v2, systemd services), and,
// where this test runs as root, a real cgroup created, entered, left, killed and removed.
#include "common/platform/process_cgroup.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "common/platform/process_info.h"

namespace trainlet::platform {
namespace {

using namespace std::chrono_literals;

// This VM: v1 controllers, a named systemd hierarchy and the unified one under /unified.
constexpr char kHybridMountinfo[] =
    "24 30 0:22 / /sys fs rw,nosuid shared:7 - sysfs sysfs rw\n"
    "27 24 0:25 / /sys/fs/cgroup ro shared:9 - tmpfs tmpfs ro,mode=755\n"
    "28 27 0:26 / /sys/fs/cgroup/unified rw shared:10 - cgroup2 cgroup2 rw,nsdelegate\n"
    "29 27 0:27 / /sys/fs/cgroup/systemd rw shared:11 - cgroup cgroup rw,xattr,name=systemd\n"
    "33 27 0:31 / /sys/fs/cgroup/cpu,cpuacct rw shared:15 - cgroup cgroup rw,cpu,cpuacct\n"
    "35 27 0:33 / /sys/fs/cgroup/freezer rw shared:17 - cgroup cgroup rw,freezer\n";
constexpr char kPureV2Mountinfo[] =
    "35 24 0:30 / /sys/fs/cgroup rw,nosuid shared:9 - cgroup2 cgroup2 rw,nsdelegate\n";

TEST(CgroupText, HybridLayout) {
  const CgroupMounts m = ParseCgroupMounts(kHybridMountinfo);
  EXPECT_EQ(m.v2, "/sys/fs/cgroup/unified");
  EXPECT_EQ(m.v1_freezer, "/sys/fs/cgroup/freezer");
}

TEST(CgroupText, PureV2Layout) {
  const CgroupMounts m = ParseCgroupMounts(kPureV2Mountinfo);
  EXPECT_EQ(m.v2, "/sys/fs/cgroup");
  EXPECT_EQ(m.v1_freezer, "");
}

TEST(CgroupText, NoCgroupsAndEscapedMountPoints) {
  EXPECT_EQ(ParseCgroupMounts("").v2, "");
  EXPECT_EQ(ParseCgroupMounts("garbage\n\n - \n").v2, "");
  // A space in a mount point is written \040.
  const CgroupMounts m =
      ParseCgroupMounts("40 24 0:40 / /mnt/my\\040cgroups rw - cgroup2 none rw\n");
  EXPECT_EQ(m.v2, "/mnt/my cgroups");
  // A v1 hierarchy without the freezer does not count.
  EXPECT_EQ(
      ParseCgroupMounts("33 27 0:31 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n").v1_freezer,
      "");
}

TEST(CgroupText, OwnCgroupPerHierarchy) {
  const std::string self =
      "12:freezer:/\n"
      "4:memory:/process_api/abc\n"
      "2:cpu,cpuacct:/system.slice/trainlet-agent.service\n"
      "1:name=systemd:/system.slice/trainlet-agent.service\n"
      "0::/system.slice/trainlet-agent.service\n";
  EXPECT_EQ(ParseOwnCgroup(self, ""), "/system.slice/trainlet-agent.service");
  EXPECT_EQ(ParseOwnCgroup(self, "freezer"), "/");
  EXPECT_EQ(ParseOwnCgroup(self, "cpuacct"), "/system.slice/trainlet-agent.service");
  EXPECT_EQ(ParseOwnCgroup(self, "memory"), "/process_api/abc");
  EXPECT_EQ(ParseOwnCgroup(self, "pids"), std::nullopt);
  EXPECT_EQ(ParseOwnCgroup("12:freezer:/\n", ""), std::nullopt);  // v1 only: no unified line
  EXPECT_EQ(ParseOwnCgroup("0::/\n", ""), "/");
  EXPECT_EQ(ParseOwnCgroup("0::not-a-path\n", ""), std::nullopt);
}

TEST(CgroupText, Modes) {
  for (const char* name : {"auto", "v2", "v1", "none"}) {
    const auto mode = ParseCgroupMode(name);
    ASSERT_TRUE(mode.has_value()) << name;
    EXPECT_EQ(CgroupModeName(*mode), name);
  }
  EXPECT_EQ(ParseCgroupMode("V2"), std::nullopt);
  EXPECT_EQ(ParseCgroupMode(""), std::nullopt);
}

TEST(ProcessCgroupTest, RefusesNamesThatAreNotOneComponent) {
  for (const char* bad : {"", "a/b", "..", "."}) {
    auto cg = ProcessCgroup::Create(bad, CgroupMode::kAuto);
    ASSERT_FALSE(cg.ok()) << bad;
    EXPECT_EQ(cg.status().code(), ErrorCode::kInvalid) << bad;
  }
  auto off = ProcessCgroup::Create("x", CgroupMode::kNone);
  ASSERT_FALSE(off.ok());
  EXPECT_EQ(off.status().code(), ErrorCode::kUnavailable);
}

class RealCgroup : public ::testing::TestWithParam<CgroupMode> {};

// A child started inside the cgroup, which then forks a grandchild into a new session, is found
// and killed with it; the creator, having left, is not.
TEST_P(RealCgroup, EnterLeaveKillRemove) {
  if (geteuid() != 0) GTEST_SKIP() << "cgroups need root here";
  const std::string name = "test-" + std::to_string(getpid());
  auto cg = ProcessCgroup::Create(name, GetParam());
  if (!cg.ok() && cg.status().code() == ErrorCode::kUnavailable) {
    GTEST_SKIP() << cg.status().message();
  }
  ASSERT_TRUE(cg.ok()) << cg.status().message();
  EXPECT_EQ((*cg)->mode(), GetParam());
  EXPECT_FALSE((*cg)->Populated());
  ASSERT_TRUE((*cg)->Enter().ok());
  int pipefd[2];
  ASSERT_EQ(pipe(pipefd), 0);
  const pid_t child = fork();
  if (child == 0) {
    if (fork() == 0) {  // the grandchild: a session of its own, then it sleeps
      setsid();
      const pid_t me = getpid();
      (void)!write(pipefd[1], &me, sizeof me);
      pause();
      _exit(0);
    }
    pause();
    _exit(0);
  }
  ASSERT_TRUE((*cg)->Leave().ok());
  pid_t grandchild = 0;
  ASSERT_EQ(read(pipefd[0], &grandchild, sizeof grandchild),
            static_cast<ssize_t>(sizeof grandchild));
  close(pipefd[0]);
  close(pipefd[1]);
  EXPECT_TRUE((*cg)->Populated());
  ASSERT_TRUE((*cg)->Kill().ok());
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while ((*cg)->Populated() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(2ms);
  }
  EXPECT_FALSE((*cg)->Populated());
  // Dead: gone, or a zombie its new parent (init) has not reaped yet.
  EXPECT_TRUE(kill(grandchild, 0) != 0 || IsZombie(grandchild))
      << "grandchild " << grandchild << " survived";
  EXPECT_TRUE((*cg)->Remove().ok());
  EXPECT_EQ(access((*cg)->path().c_str(), F_OK), -1);
}

INSTANTIATE_TEST_SUITE_P(Hierarchies, RealCgroup,
                         ::testing::Values(CgroupMode::kV2, CgroupMode::kV1Freezer),
                         [](const auto& info) {
                           return std::string(info.param == CgroupMode::kV2 ? "v2" : "v1");
                         });

}  // namespace
}  // namespace trainlet::platform
