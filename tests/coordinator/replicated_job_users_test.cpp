// Replicated jobs of two users at once (coordinator/replicated_job_users): refused at apply when
// the spec says for certain that they would share the work dir on every node without one
// fsGroup; accepted with a common fsGroup, when dependsOn Complete orders them, and when a user
// is the node's to decide (the node's check stays the backstop).

#include "coordinator/replicated_job_users.h"

#include <gtest/gtest.h>

namespace trainlet::coordinator {
namespace {

struct Who {
  std::optional<int64_t> user, fs_group, group;
};

trainjob::ReplicatedJob Rj(const std::string& name, Who who,
                           std::vector<trainjob::JobDependency> deps = {}) {
  trainjob::ReplicatedJob rj;
  rj.name = name;
  trainjob::ContainerSpec c;
  c.name = name == "launcher" ? "node" : name;
  c.command = {"run"};
  c.run_as_user = who.user;
  c.run_as_group = who.group;
  c.fs_group = who.fs_group;
  rj.container = c;
  rj.depends_on = std::move(deps);
  return rj;
}

trainjob::TrainingRuntime Runtime(std::vector<trainjob::ReplicatedJob> jobs) {
  trainjob::TrainingRuntime rt;
  rt.kind = "ClusterTrainingRuntime";
  rt.name = "rt";
  for (const auto& j : jobs) {
    if (j.name == "node") rt.node = j.container;
    if (j.name == "launcher") rt.launcher = j.container;
  }
  rt.jobs = std::move(jobs);
  return rt;
}

trainjob::TrainJob Job() {
  trainjob::TrainJob job;
  job.name = "j";
  return job;
}

Status Check(const trainjob::TrainingRuntime& rt) { return CheckReplicatedJobUsers(Job(), rt); }

TEST(ReplicatedJobUsersTest, TwoUsersAtOnceWithoutFsGroupAreRefusedNamingTheField) {
  auto rt = Runtime({Rj("sidecar", {.user = 1}), Rj("node", {.user = 65534})});
  Status s = Check(rt);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), ErrorCode::kInvalid);
  EXPECT_NE(s.message().find("TrainJob/j: ClusterTrainingRuntime/rt: spec.template.spec."
                             "replicatedJobs[1].template.spec.template.spec.securityContext."
                             "fsGroup: replicated jobs sidecar (runAsUser 1) and node (runAsUser "
                             "65534) run at the same time"),
            std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("dependsOn the other with status: Complete"), std::string::npos);
}

TEST(ReplicatedJobUsersTest, TheFieldNamedIsThePodWithoutFsGroup) {
  auto rt = Runtime({Rj("node", {.user = 65534}), Rj("sidecar", {.user = 1, .fs_group = 7})});
  Status s = Check(rt);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("replicatedJobs[0].template.spec.template.spec.securityContext"
                             ".fsGroup: "),
            std::string::npos)
      << s.message();
}

TEST(ReplicatedJobUsersTest, ACommonFsGroupLetsThemShare) {
  EXPECT_TRUE(Check(Runtime({Rj("sidecar", {.user = 1, .fs_group = 4242}),
                             Rj("node", {.user = 65534, .fs_group = 4242})}))
                  .ok());
}

TEST(ReplicatedJobUsersTest, TwoDifferentFsGroupsAreRefused) {
  Status s = Check(Runtime(
      {Rj("sidecar", {.user = 1, .fs_group = 1}), Rj("node", {.user = 65534, .fs_group = 2})}));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("sidecar (runAsUser 1, fsGroup 1) and node (runAsUser 65534, "
                             "fsGroup 2)"),
            std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("two fsGroups"), std::string::npos) << s.message();
}

TEST(ReplicatedJobUsersTest, OneUserOrTheSameUidNeedsNoFsGroup) {
  EXPECT_TRUE(Check(Runtime({Rj("sidecar", {.user = 5}), Rj("node", {.user = 5})})).ok());
  // A group alone is no user: the uid stays the agent's for both.
  EXPECT_TRUE(Check(Runtime({Rj("sidecar", {.group = 1}), Rj("node", {.user = 5})})).ok());
}

// Where the spec names no user, the agent's run_as decides: only the node knows, and its check
// (StepUsers::Admit) stays the backstop.
TEST(ReplicatedJobUsersTest, AUserTheNodeDecidesIsLeftToTheNode) {
  EXPECT_TRUE(Check(Runtime({Rj("sidecar", {.user = 1}), Rj("node", {})})).ok());
}

TEST(ReplicatedJobUsersTest, DependsOnCompleteOrdersThemAndReadyDoesNot) {
  EXPECT_TRUE(
      Check(Runtime({Rj("init", {.user = 1}), Rj("node", {.user = 2}, {{"init", "Complete"}})}))
          .ok());
  EXPECT_FALSE(
      Check(Runtime({Rj("init", {.user = 1}), Rj("node", {.user = 2}, {{"init", "Ready"}})})).ok());
  // A step after the training (dependsOn node Complete).
  EXPECT_TRUE(
      Check(Runtime({Rj("node", {.user = 2}), Rj("export", {.user = 1}, {{"node", "Complete"}})}))
          .ok());
}

TEST(ReplicatedJobUsersTest, OrderFollowsChainsOfDependsOn) {
  // node waits (Ready) for b, which waits (Complete) for a: node starts after a ended.
  auto rt = Runtime({Rj("a", {.user = 1}), Rj("b", {}, {{"a", "Complete"}}),
                     Rj("node", {.user = 2}, {{"b", "Ready"}})});
  EXPECT_TRUE(RunTogether(ReplicatedJobUsersOf(rt), "b", "node"));
  EXPECT_FALSE(RunTogether(ReplicatedJobUsersOf(rt), "a", "node"));
  EXPECT_TRUE(Check(rt).ok());
  // node waits (Complete) for b, which waits (Ready) for a: a may still run when b ends.
  auto rt2 = Runtime({Rj("a", {.user = 1}), Rj("b", {}, {{"a", "Ready"}}),
                      Rj("node", {.user = 2}, {{"b", "Complete"}})});
  EXPECT_TRUE(RunTogether(ReplicatedJobUsersOf(rt2), "a", "node"));
  EXPECT_FALSE(Check(rt2).ok());
  // Complete all the way: ordered.
  auto rt3 = Runtime({Rj("a", {.user = 1}), Rj("b", {}, {{"a", "Complete"}}),
                      Rj("node", {.user = 2}, {{"b", "Complete"}})});
  EXPECT_FALSE(RunTogether(ReplicatedJobUsersOf(rt3), "a", "node"));
  EXPECT_TRUE(Check(rt3).ok());
}

// With a launcher, mpirun, every orted and every rank run as the launcher's user: `launcher` and
// `node` are one replicated job, the node container's user is not used (a warning says so), and a
// step is compared with the launcher's user.
TEST(ReplicatedJobUsersTest, ALauncherAndItsNodesAreOneUser) {
  auto rt = Runtime(
      {Rj("launcher", {.user = 1}, {{"node", "Ready"}}), Rj("node", {.user = 2, .fs_group = 9})});
  EXPECT_TRUE(Check(rt).ok());
  auto users = ReplicatedJobUsersOf(rt);
  ASSERT_EQ(users.size(), 1u);
  EXPECT_EQ(users[0].name, "launcher");
  auto warnings = UserWarnings(Job(), rt);
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_NE(warnings[0].find("spec.template.spec.replicatedJobs[1].template.spec.template.spec."
                             "containers[node].securityContext.runAsUser: 2 is not used: with a "
                             "launcher, mpirun, every orted and every rank run as the launcher "
                             "container's user"),
            std::string::npos)
      << warnings[0];
  EXPECT_NE(warnings[1].find("securityContext.fsGroup: 9 is not used"), std::string::npos);

  auto with_step = Runtime({Rj("launcher", {.user = 1}), Rj("node", {.user = 1}),
                            Rj("sidecar", {.user = 3}, {{"node", "Ready"}})});
  Status s = Check(with_step);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("launcher (runAsUser 1) and sidecar (runAsUser 3)"), std::string::npos)
      << s.message();
  EXPECT_TRUE(UserWarnings(Job(), with_step).empty());
  // The main one waits as node does: a step node waits for to Complete is before all of it.
  EXPECT_TRUE(Check(Runtime({Rj("launcher", {.user = 1}), Rj("prep", {.user = 3}),
                             Rj("node", {.user = 1}, {{"prep", "Complete"}})}))
                  .ok());
}

}  // namespace
}  // namespace trainlet::coordinator
