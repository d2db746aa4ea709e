// Who a rank runs as (agent/step/rank_identity.h): the agent's run_as and a job's
// securityContext resolved against a fake account database, the --as argument's round trip, and
// the privilege drop itself (in a forked child, as root only).
#include "agent/step/rank_identity.h"

#include <gtest/gtest.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <map>

#include "tests/common/test_dir.h"

namespace trainlet::step {
namespace {

// root (0), nobody (65534, group nogroup 65534), alice (1000, groups 1000 and 27).
AccountLookup FakeAccounts() {
  static const std::map<std::string, Account> accounts = {{"root", {"root", 0, 0}},
                                                          {"nobody", {"nobody", 65534, 65534}},
                                                          {"alice", {"alice", 1000, 1000}}};
  AccountLookup lookup;
  lookup.by_name = [](const std::string& name) -> std::optional<Account> {
    auto it = accounts.find(name);
    if (it == accounts.end()) return std::nullopt;
    return it->second;
  };
  lookup.by_uid = [](uid_t uid) -> std::optional<Account> {
    for (const auto& [name, a] : accounts) {
      if (a.uid == uid) return a;
    }
    return std::nullopt;
  };
  lookup.group_by_name = [](const std::string& name) -> std::optional<gid_t> {
    if (name == "nogroup") return 65534;
    if (name == "sudo") return 27;
    return std::nullopt;
  };
  lookup.groups_of = [](const Account& a) {
    return a.name == "alice" ? std::vector<gid_t>{1000, 27} : std::vector<gid_t>{a.gid};
  };
  return lookup;
}

RunAsRequest Req(std::string agent, std::optional<int64_t> user, std::optional<int64_t> group) {
  return RunAsRequest{std::move(agent), user, group};
}

Result<std::optional<RankIdentity>> Resolve(RunAsRequest request, uid_t euid = 0) {
  return RankIdentity::Resolve(request, euid, FakeAccounts());
}

TEST(RankIdentity, NothingAskedIsTheStepsOwnUser) {
  auto id = Resolve({});
  ASSERT_TRUE(id.ok());
  EXPECT_FALSE(id->has_value());
  // run_as: root, on a root agent, is the default too.
  id = Resolve(Req("root", std::nullopt, std::nullopt));
  ASSERT_TRUE(id.ok());
  EXPECT_FALSE(id->has_value());
}

TEST(RankIdentity, AgentRunAsByNameUidAndGroup) {
  auto id = Resolve(Req("alice", std::nullopt, std::nullopt));
  ASSERT_TRUE(id.ok()) << id.status().message();
  ASSERT_TRUE(id->has_value());
  EXPECT_EQ((*id)->uid, 1000u);
  EXPECT_EQ((*id)->gid, 1000u);
  EXPECT_EQ((*id)->groups, (std::vector<gid_t>{1000, 27}));
  EXPECT_EQ((*id)->field, "run_as");

  id = Resolve(Req("65534", std::nullopt, std::nullopt));
  ASSERT_TRUE(id.ok()) << id.status().message();
  EXPECT_EQ((*id)->name, "nobody");

  id = Resolve(Req("alice:nogroup", std::nullopt, std::nullopt));
  ASSERT_TRUE(id.ok()) << id.status().message();
  EXPECT_EQ((*id)->uid, 1000u);
  EXPECT_EQ((*id)->gid, 65534u);
  EXPECT_EQ((*id)->groups, (std::vector<gid_t>{65534}));  // no supplementary groups of alice's

  id = Resolve(Req("nobody:4242", std::nullopt, std::nullopt));
  ASSERT_TRUE(id.ok()) << id.status().message();
  EXPECT_EQ((*id)->gid, 4242u);
}

TEST(RankIdentity, JobSecurityContextOverridesTheAgent) {
  auto id = Resolve(Req("nobody", 1000, 5));
  ASSERT_TRUE(id.ok()) << id.status().message();
  EXPECT_EQ((*id)->uid, 1000u);
  EXPECT_EQ((*id)->gid, 5u);
  EXPECT_EQ((*id)->field, "securityContext.runAsUser");
  // runAsGroup alone keeps the agent's user.
  id = Resolve(Req("alice", std::nullopt, 7));
  ASSERT_TRUE(id.ok()) << id.status().message();
  EXPECT_EQ((*id)->uid, 1000u);
  EXPECT_EQ((*id)->gid, 7u);
}

// The pod's securityContext.fsGroup is a supplementary group of the rank (once, after the others),
// as on Kubernetes; it is not who the rank is.
TEST(RankIdentity, FsGroupIsASupplementaryGroup) {
  RunAsRequest request = Req("", 1000, std::nullopt);
  request.fs_group = 4242;
  auto id = Resolve(request);
  ASSERT_TRUE(id.ok()) << id.status().message();
  EXPECT_EQ((*id)->gid, 1000u);
  EXPECT_EQ((*id)->groups, (std::vector<gid_t>{1000, 27, 4242}));
  EXPECT_EQ((*id)->fs_group, std::optional<gid_t>(4242));
  request.fs_group = 27;  // a group the user has already: not twice
  id = Resolve(request);
  ASSERT_TRUE(id.ok());
  EXPECT_EQ((*id)->groups, (std::vector<gid_t>{1000, 27}));
  EXPECT_EQ(RankIdentity::Decode((*id)->Encode())->groups, (*id)->groups);
  // Alone it asks nobody to switch: a rank of the step's own user gets nothing of it.
  RunAsRequest only;
  only.fs_group = 4242;
  EXPECT_TRUE(only.empty());
  request.fs_group = -3;
  id = Resolve(request);
  ASSERT_FALSE(id.ok());
  EXPECT_NE(id.status().message().find("securityContext.fsGroup: -3 is not a valid id"),
            std::string::npos)
      << id.status().message();
}

TEST(RankIdentity, ErrorsNameTheField) {
  struct Case {
    RunAsRequest request;
    uid_t euid;
    std::string want;
  };
  const Case cases[] = {
      {Req("ghost", std::nullopt, std::nullopt), 0,
       "run_as: user 'ghost' does not exist on this node"},
      {Req("4711", std::nullopt, std::nullopt), 0, "run_as: uid 4711 does not exist on this node"},
      {Req("nobody:nosuch", std::nullopt, std::nullopt), 0,
       "run_as: group 'nosuch' does not exist"},
      {Req(":nogroup", std::nullopt, std::nullopt), 0, "run_as: no user before ':'"},
      {Req("", 4711, std::nullopt), 0, "securityContext.runAsUser: uid 4711 does not exist"},
      {Req("", -1, std::nullopt), 0, "securityContext.runAsUser: -1 is not a valid id"},
      {Req("nobody", 0, std::nullopt), 0, "securityContext.runAsUser: 0 (root) is refused"},
      {Req("nobody", std::nullopt, std::nullopt), 1000,
       "run_as: the agent runs as uid 1000, not root"},
      {Req("", 65534, std::nullopt), 1000,
       "securityContext.runAsUser: the agent runs as uid 1000, not root"},
  };
  for (const Case& c : cases) {
    auto id = Resolve(c.request, c.euid);
    ASSERT_FALSE(id.ok()) << c.want;
    EXPECT_NE(id.status().message().find(c.want), std::string::npos)
        << "got: " << id.status().message() << "\nwant: " << c.want;
  }
}

TEST(RankIdentity, ANonRootAgentMayNameItself) {
  auto id = Resolve(Req("alice", std::nullopt, std::nullopt), 1000);
  ASSERT_TRUE(id.ok()) << id.status().message();
  EXPECT_FALSE(id->has_value());
  // A job that asks for root, where the agent's run_as is root, is allowed.
  id = Resolve(Req("root", 0, std::nullopt));
  ASSERT_TRUE(id.ok()) << id.status().message();
}

TEST(RankIdentity, EncodeDecodeRoundTrip) {
  RankIdentity id{65534, 65534, {65534, 27}, "", ""};
  EXPECT_EQ(id.Encode(), "65534:65534:65534,27");
  auto back = RankIdentity::Decode(id.Encode());
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->uid, id.uid);
  EXPECT_EQ(back->gid, id.gid);
  EXPECT_EQ(back->groups, id.groups);
  EXPECT_TRUE(RankIdentity::Decode("1:2:").ok());
  for (const char* bad : {"", "1", "1:2", "x:2:3", "1:2:a", "1:99999999999:"}) {
    EXPECT_FALSE(RankIdentity::Decode(bad).ok()) << bad;
  }
  EXPECT_EQ(RunAsArgv("/bin/trainlet-step", id, "/s/env-0-1", {"sh", "-c", "id"}),
            (std::vector<std::string>{"/bin/trainlet-step", "--as", "65534:65534:65534,27",
                                      "/s/env-0-1", "--", "sh", "-c", "id"}));
}

// The rank's env reaches the helper through a file, read once: never through the env of a
// process that starts as root (LD_PRELOAD would run as root in the loader).
TEST(RankIdentity, EnvFileRoundTripsOnce) {
  testing::TempDir dir;
  const std::string path = dir.File("env-0-1");
  const std::vector<std::string> env = {"A=1", "LD_PRELOAD=/x.so", "EMPTY=", "NL=a\nb"};
  ASSERT_TRUE(WriteEnvFile(path, env).ok());
  struct stat st {};
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  EXPECT_FALSE(WriteEnvFile(path, env).ok());  // never over an existing file
  auto back = TakeEnvFile(path);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(*back, env);
  EXPECT_NE(access(path.c_str(), F_OK), 0);  // removed once read
  EXPECT_FALSE(TakeEnvFile(path).ok());
}

// What describe shows (WorkerEvent.run_as): the name when the account has one.
TEST(RankIdentity, TextNamesTheAccountAndItsIds) {
  EXPECT_EQ((RankIdentity{65534, 65534, {65534}, "nobody", "run_as"}).Text(),
            "nobody (uid 65534, gid 65534)");
  EXPECT_EQ((RankIdentity{4000, 100, {100}, "", "securityContext.runAsUser"}).Text(),
            "uid 4000, gid 100");
  EXPECT_EQ(RankIdentity::TextOf(RunAsRequest{}), "");  // nothing asked: the agent's own user
}

// The real drop, in a child: afterwards it is nobody and cannot become root again.
TEST(RankIdentity, DropPrivilegesLeavesNoWayBack) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to switch users";
  auto id = RankIdentity::Resolve(Req("nobody", std::nullopt, std::nullopt), 0, SystemAccounts());
  if (!id.ok()) GTEST_SKIP() << "no user nobody here: " << id.status().message();
  ASSERT_TRUE(id->has_value());
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (!DropPrivileges(**id).ok()) _exit(1);
    if (getuid() != (*id)->uid || geteuid() != (*id)->uid || getegid() != (*id)->gid) _exit(2);
    if (setuid(0) == 0 || seteuid(0) == 0) _exit(3);
    gid_t groups[8];
    if (getgroups(8, groups) < 1) _exit(4);
    for (int i = 0; i < getgroups(8, groups); ++i) {
      if (groups[i] == 0) _exit(5);  // root's group is gone with setgroups
    }
    // issue 19: no setuid binary may lift it back (no_new_privs).
    if (prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 1) _exit(6);
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

// issue 19: after the drop, a setuid-root program (a copy of `id` made here) runs with the rank's
// uid, not root's: no_new_privs keeps execve from granting anything.
TEST(RankIdentity, ASetuidRootBinaryCannotLiftTheRankBack) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to switch users";
  auto id = RankIdentity::Resolve(Req("nobody", std::nullopt, std::nullopt), 0, SystemAccounts());
  if (!id.ok()) GTEST_SKIP() << "no user nobody here: " << id.status().message();
  ASSERT_TRUE(id->has_value());
  testing::TempDir dir;
  chmod(dir.path().c_str(), 0755);
  const std::string suid_id = dir.File("id");
  std::filesystem::copy_file("/usr/bin/id", suid_id);
  ASSERT_EQ(chown(suid_id.c_str(), 0, 0), 0);
  ASSERT_EQ(chmod(suid_id.c_str(), 04755), 0);
  int out[2];
  ASSERT_EQ(pipe(out), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(out[0]);
    dup2(out[1], STDOUT_FILENO);
    if (!DropPrivileges(**id).ok()) _exit(1);
    execl(suid_id.c_str(), suid_id.c_str(), "-u", static_cast<char*>(nullptr));
    _exit(2);
  }
  close(out[1]);
  std::string printed;
  char buf[64];
  for (ssize_t n; (n = read(out[0], buf, sizeof buf)) > 0;) printed.append(buf, n);
  close(out[0]);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(printed, std::to_string((*id)->uid) + "\n") << "the setuid copy of id lifted the rank";
}

}  // namespace
}  // namespace trainlet::step
