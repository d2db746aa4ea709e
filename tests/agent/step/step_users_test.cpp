// StepUsers (agent/step/step_users.h): which users may hold a job's work dir at once. Ranks of
// two users run together only when both ask the same securityContext.fsGroup; a user whose ranks
// have all ended leaves the dir to the next one.
#include "agent/step/step_users.h"

#include <gtest/gtest.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <memory>

#include "tests/common/test_dir.h"

namespace trainlet::step {
namespace {

RankIdentity Id(uid_t uid, std::optional<gid_t> fs_group = std::nullopt) {
  RankIdentity id{uid, uid, {uid}, "", "securityContext.runAsUser"};
  id.fs_group = fs_group;
  if (fs_group) id.groups.push_back(*fs_group);
  return id;
}

TEST(StepUsers, TwoUsersAtOnceNeedOneFsGroup) {
  const std::string w = "/state/work/job";
  EXPECT_EQ(WorkDirConflict(w, Id(1), {}), "");
  EXPECT_EQ(WorkDirConflict(w, Id(1), {Id(1), Id(1, 7)}), "");  // the same user
  EXPECT_EQ(WorkDirConflict(w, Id(1, 7), {Id(2, 7)}), "");
  const std::string none = WorkDirConflict(w, Id(1), {Id(2)});
  EXPECT_EQ(none.rfind("securityContext.fsGroup: ranks of uid 2 and uid 1 would share the job's "
                       "work dir /state/work/job on this node at the same time",
                       0),
            0u)
      << none;
  EXPECT_NE(none.find("set the same securityContext.fsGroup in the pods of both"),
            std::string::npos);
  EXPECT_NE(WorkDirConflict(w, Id(1, 7), {Id(2)}), "");  // one of them without
  const std::string two = WorkDirConflict(w, Id(1, 7), {Id(2, 8)});
  EXPECT_NE(two.find("(fsGroup 8) and uid 1 (fsGroup 7)"), std::string::npos) << two;
}

// Admit records each rank as a holder until Release; the rule counts only the ranks still
// holding the same dir. As root, the dir is given as GiveJobDirs gives it.
TEST(StepUsers, AUserWhoseRanksEndedLeavesTheDirToTheNext) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to give the dir to other users";
  // getpwnam's answer lives in one static buffer: each uid is copied before the next call.
  const passwd* pw = getpwnam("nobody");
  const std::optional<uid_t> ua = pw != nullptr ? std::optional<uid_t>(pw->pw_uid) : std::nullopt;
  pw = getpwnam("daemon");
  const std::optional<uid_t> ub = pw != nullptr ? std::optional<uid_t>(pw->pw_uid) : std::nullopt;
  if (!ua || !ub) GTEST_SKIP() << "no users nobody and daemon here";
  testing::TempDir root;
  chmod(root.path().c_str(), 0711);
  const std::string work = root.path() + "/job";
  const std::string other = root.path() + "/other";
  std::filesystem::create_directories(work);
  std::filesystem::create_directories(other);
  StepUsers users;
  ASSERT_TRUE(users.Admit(0, work, "", Id(*ua)).ok());
  ASSERT_TRUE(users.Admit(1, work, "", Id(*ua)).ok());
  Status refused = users.Admit(2, work, "", Id(*ub));
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("securityContext.fsGroup"), std::string::npos);
  users.Release(2);                                      // its start failed
  EXPECT_TRUE(users.Admit(3, other, "", Id(*ub)).ok());  // another job's dir: no matter
  users.Release(0);
  EXPECT_FALSE(users.Admit(4, work, "", Id(*ub)).ok());  // rank 1 still holds it
  users.Release(1);
  ASSERT_TRUE(users.Admit(4, work, "", Id(*ub)).ok());  // the sequential case
  struct stat st {};
  ASSERT_EQ(stat(work.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, *ub);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  EXPECT_EQ(users.HoldersOf(work), std::vector<uid_t>{*ub});

  // With one fsGroup both at once, and the dir is the group's.
  users.Release(4);
  ASSERT_TRUE(users.Admit(5, work, "", Id(*ua, 4242)).ok());
  ASSERT_TRUE(users.Admit(6, work, "", Id(*ub, 4242)).ok());
  EXPECT_EQ(users.HoldersOf(work).size(), 2u);
  ASSERT_EQ(stat(work.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0u);
  EXPECT_EQ(st.st_gid, 4242u);
  EXPECT_EQ(st.st_mode & 07777, 03770u);  // the work dir: setgid and sticky (rank_files.cpp)
  // A helper of a rank's user (no index) is checked, never recorded.
  EXPECT_FALSE(users.Admit(std::nullopt, work, "", Id(4711)).ok());
  EXPECT_EQ(users.HoldersOf(work).size(), 2u);
}

// Two steps of one job on the node (a replicated job a later plan started, an exec session): each
// holds its users' lock files in the work dir, so the rule holds across them; a step whose ranks
// of that user are gone (released, or the step ended) holds nothing.
TEST(StepUsers, TheRuleHoldsAcrossTheStepsOfAJob) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to give the dir to other users";
  testing::TempDir root;
  chmod(root.path().c_str(), 0711);
  const std::string work = root.path() + "/job";
  std::filesystem::create_directories(work);
  auto first = std::make_unique<StepUsers>();
  StepUsers second;
  ASSERT_TRUE(first->Admit(0, work, "", Id(65534)).ok());
  Status refused = second.Admit(0, work, "", Id(1));
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("securityContext.fsGroup: ranks of uid 65534 and uid 1"),
            std::string::npos)
      << refused.message();
  EXPECT_NE(refused.message().find("another trainlet-step"), std::string::npos);
  second.Release(0);
  first->Release(0);
  ASSERT_TRUE(second.Admit(1, work, "", Id(1)).ok());  // the first one's ranks are gone
  second.Release(1);
  // With one fsGroup, at once; a step that ends lets go of its holds.
  ASSERT_TRUE(first->Admit(2, work, "", Id(65534, 4242)).ok());
  ASSERT_TRUE(second.Admit(2, work, "", Id(1, 4242)).ok());
  EXPECT_FALSE(second.Admit(3, work, "", Id(2, 4243)).ok());
  second.Release(3);
  first.reset();
  EXPECT_FALSE(second.Admit(4, work, "", Id(2)).ok());  // second's own uid 1 still holds it
  second.Release(4);
  second.Release(2);
  EXPECT_TRUE(second.Admit(5, work, "", Id(2)).ok());
  struct stat st {};
  ASSERT_EQ(stat((work + "/.trainlet-secrets/uid-2.lock").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0u);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
}

}  // namespace
}  // namespace trainlet::step
