// AccessPolicy: parsing a policy file (each error names the file, line and field) and every verb
// for every role and namespace; AccessPolicyFile's reload.
#include "coordinator/access_policy.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <vector>

namespace trainlet::coordinator {
namespace {

using ::testing::HasSubstr;

constexpr const char* kPolicy = R"(users:
  alice: {role: admin}
  bob: {role: user, namespaces: [team-a]}
  carol:
    role: user
    namespaces: [team-b, shared]
  dave: {role: user}
)";

AccessPolicy Policy() {
  auto p = AccessPolicy::Parse(kPolicy, "policy.yaml");
  EXPECT_TRUE(p.ok()) << p.status().message();
  return p.ok() ? *p : AccessPolicy::AllAdmin();
}

std::string ParseError(const std::string& yaml) {
  auto p = AccessPolicy::Parse(yaml, "policy.yaml");
  EXPECT_FALSE(p.ok()) << yaml;
  if (p.ok()) return "";
  EXPECT_EQ(p.status().code(), ErrorCode::kInvalid);
  return p.status().message();
}

TEST(AccessPolicyParse, ErrorsNameTheFileLineAndField) {
  EXPECT_EQ(ParseError("users:\n  bob: {role: root}\n"),
            "policy.yaml: line 2, column 15: users.bob.role: must be admin or user, got \"root\"");
  EXPECT_THAT(ParseError("users:\n  bob: {namespaces: [a]}\n"),
              HasSubstr("line 2, column 8: users.bob.role: required"));
  EXPECT_THAT(ParseError("users:\n  bob: {role: user, namespace: [a]}\n"),
              HasSubstr("line 2, column 21: users.bob.namespace: unknown field"));
  EXPECT_THAT(ParseError("users:\n  bob: {role: user, namespaces: [Team_A]}\n"),
              HasSubstr("line 2, column 34: users.bob.namespaces[0]: must be a lowercase RFC "
                        "1123 label, got \"Team_A\""));
  EXPECT_THAT(ParseError("users:\n  bob: {role: user, namespaces: team-a}\n"),
              HasSubstr("users.bob.namespaces: must be a list of namespaces"));
  EXPECT_THAT(ParseError("users:\n  alice: {role: admin, namespaces: [a]}\n"),
              HasSubstr("users.alice.namespaces: only for role user"));
  EXPECT_THAT(ParseError("users:\n  bob: admin\n"),
              HasSubstr("line 2, column 8: users.bob: must be a map, got \"admin\""));
  EXPECT_THAT(ParseError("users: [bob]\n"), HasSubstr("line 1, column 8: users: must be a map"));
  EXPECT_THAT(ParseError("groups: {}\n"), HasSubstr("line 1, column 1: groups: unknown field"));
  EXPECT_THAT(ParseError("- a\n"), HasSubstr("(top level): must be a map"));
  EXPECT_THAT(ParseError("users: {bob: [\n"), HasSubstr("policy.yaml: line 2"));
}

TEST(AccessPolicyParse, EmptyFileRefusesEveryone) {
  auto p = AccessPolicy::Parse("", "policy.yaml");
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p->enforced());
  EXPECT_EQ(p->Check("alice", Verb::kGet, "default").code(), ErrorCode::kPermission);
}

TEST(AccessPolicy, WithoutAFileEveryoneIsAdmin) {
  const AccessPolicy p = AccessPolicy::AllAdmin();
  EXPECT_FALSE(p.enforced());
  for (Verb v : {Verb::kApply, Verb::kDelete, Verb::kLogs, Verb::kCordon, Verb::kDrain}) {
    EXPECT_TRUE(p.Check("anyone", v, "team-a").ok());
  }
  EXPECT_TRUE(p.CheckApply("", "ClusterTrainingRuntime", "").ok());
}

constexpr Verb kJobVerbs[] = {Verb::kApply, Verb::kSuspend, Verb::kResume, Verb::kDelete,
                              Verb::kLogs};

TEST(AccessPolicy, AdminMayDoEverythingEverywhere) {
  const AccessPolicy p = Policy();
  for (Verb v : kJobVerbs) {
    for (const char* ns : {"default", "team-a", "team-b"}) {
      EXPECT_TRUE(p.Check("alice", v, ns).ok()) << VerbPhrase(v) << " " << ns;
    }
  }
  EXPECT_TRUE(p.Check("alice", Verb::kGet, "team-b").ok());
  EXPECT_TRUE(p.Check("alice", Verb::kCordon, "").ok());
  EXPECT_TRUE(p.Check("alice", Verb::kDrain, "").ok());
  EXPECT_TRUE(p.CheckApply("alice", "TrainingRuntime", "team-a").ok());
  EXPECT_TRUE(p.CheckApply("alice", "ClusterQueue", "").ok());
}

TEST(AccessPolicy, UserActsOnlyInTheirNamespaces) {
  const AccessPolicy p = Policy();
  for (Verb v : kJobVerbs) {
    EXPECT_TRUE(p.Check("bob", v, "team-a").ok()) << VerbPhrase(v);
    EXPECT_TRUE(p.Check("carol", v, "team-b").ok()) << VerbPhrase(v);
    EXPECT_TRUE(p.Check("carol", v, "shared").ok()) << VerbPhrase(v);
    for (const char* ns : {"team-b", "default", "shared"}) {
      Status s = p.Check("bob", v, ns);
      EXPECT_EQ(s.code(), ErrorCode::kPermission) << VerbPhrase(v) << " " << ns;
      EXPECT_EQ(s.message(), "user \"bob\" may not " + std::string(VerbPhrase(v)) +
                                 " in namespace \"" + ns + "\"");
    }
    EXPECT_EQ(p.Check("carol", v, "team-a").code(), ErrorCode::kPermission);
    EXPECT_EQ(p.Check("dave", v, "team-a").code(), ErrorCode::kPermission);
  }
  EXPECT_EQ(p.Check("bob", Verb::kDelete, "team-b").message(),
            "user \"bob\" may not delete trainjobs in namespace \"team-b\"");
}

TEST(AccessPolicy, UserReadsEveryStatus) {
  const AccessPolicy p = Policy();
  for (const char* user : {"bob", "carol", "dave"}) {
    for (const char* ns : {"default", "team-a", "team-b"}) {
      EXPECT_TRUE(p.Check(user, Verb::kGet, ns).ok()) << user << " " << ns;
    }
  }
}

TEST(AccessPolicy, UserManagesNoNodesRuntimesOrQueues) {
  const AccessPolicy p = Policy();
  EXPECT_EQ(p.Check("bob", Verb::kCordon, "").message(), "user \"bob\" may not cordon nodes");
  EXPECT_EQ(p.Check("bob", Verb::kDrain, "").message(), "user \"bob\" may not drain nodes");
  for (const char* kind : {"ClusterTrainingRuntime", "TrainingRuntime", "ResourceFlavor",
                           "ClusterQueue", "LocalQueue", "WorkloadPriorityClass"}) {
    EXPECT_TRUE(AdminOnlyKind(kind)) << kind;
    EXPECT_EQ(p.CheckApply("bob", kind, "team-a").code(), ErrorCode::kPermission) << kind;
  }
  EXPECT_EQ(p.CheckApply("bob", "TrainingRuntime", "team-a").message(),
            "user \"bob\" may not apply trainingruntimes (admins only) in namespace \"team-a\"");
  EXPECT_TRUE(p.CheckApply("bob", "TrainJob", "team-a").ok());
  EXPECT_TRUE(p.CheckApply("bob", "PyTorchJob", "team-a").ok());
  EXPECT_EQ(p.CheckApply("bob", "TrainJob", "team-b").code(), ErrorCode::kPermission);
  EXPECT_FALSE(AdminOnlyKind("TrainJob"));
}

TEST(AccessPolicy, UnknownUserMayDoNothing) {
  const AccessPolicy p = Policy();
  for (Verb v : {Verb::kGet, Verb::kApply, Verb::kDelete, Verb::kLogs, Verb::kCordon}) {
    Status s = p.Check("mallory", v, "team-a");
    EXPECT_EQ(s.code(), ErrorCode::kPermission);
    EXPECT_THAT(s.message(), HasSubstr("user \"mallory\" may not"));
    EXPECT_THAT(s.message(), HasSubstr("does not name the user"));
  }
  EXPECT_EQ(p.Check("", Verb::kGet, "default").code(), ErrorCode::kPermission);
}

// Run-as rules (issue 19): the uids and gids a namespace's jobs may ask.
constexpr const char* kRunAsPolicy = R"(users:
  alice: {role: admin}
  bob: {role: user, namespaces: [team-a, team-b]}
namespaces:
  team-a:
    runAsUsers: ["1000-1999", 65534]
    runAsGroups: [1000]
  team-c: {}
)";

std::vector<RunAsAsk> Asks(std::optional<int64_t> uid, std::optional<int64_t> gid) {
  std::vector<RunAsAsk> out;
  if (uid) out.push_back({"rt: c.securityContext.runAsUser", false, *uid});
  if (gid) out.push_back({"rt: c.securityContext.runAsGroup", true, *gid});
  return out;
}

TEST(AccessPolicyRunAs, ParsesIdsAndRangesAndNamesBadOnes) {
  EXPECT_TRUE(AccessPolicy::Parse(kRunAsPolicy, "policy.yaml").ok());
  EXPECT_THAT(ParseError("namespaces:\n  team-a: {runAsUsers: [\"2000-1000\"]}\n"),
              HasSubstr("line 2, column 25: namespaces.team-a.runAsUsers[0]: must be an id from 0 "
                        "to 4294967294 or a range \"FIRST-LAST\", got \"2000-1000\""));
  EXPECT_THAT(ParseError("namespaces:\n  team-a: {runAsUsers: [-1]}\n"),
              HasSubstr("namespaces.team-a.runAsUsers[0]: must be an id"));
  EXPECT_THAT(ParseError("namespaces:\n  team-a: {runAsUsers: [4294967295]}\n"),
              HasSubstr("namespaces.team-a.runAsUsers[0]: must be an id"));
  EXPECT_THAT(ParseError("namespaces:\n  team-a: {runAsUsers: 1000}\n"),
              HasSubstr("namespaces.team-a.runAsUsers: must be a list of ids and ranges"));
  EXPECT_THAT(ParseError("namespaces:\n  team-a: {runAsUser: [1000]}\n"),
              HasSubstr("namespaces.team-a.runAsUser: unknown field (a namespace has runAsUsers "
                        "and runAsGroups)"));
  EXPECT_THAT(ParseError("namespaces:\n  Team_A: {}\n"),
              HasSubstr("namespaces.Team_A: a namespace must be a lowercase RFC 1123 label"));
  EXPECT_THAT(ParseError("namespaces: [team-a]\n"), HasSubstr("namespaces: must be a map"));
}

TEST(AccessPolicyRunAs, UsersAskOnlyTheIdsTheirNamespaceAllows) {
  auto p = AccessPolicy::Parse(kRunAsPolicy, "policy.yaml");
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p->CheckRunAs("bob", "team-a", Asks(1000, 1000)).ok());
  EXPECT_TRUE(p->CheckRunAs("bob", "team-a", Asks(1999, std::nullopt)).ok());
  EXPECT_TRUE(p->CheckRunAs("bob", "team-a", Asks(65534, std::nullopt)).ok());
  EXPECT_TRUE(p->CheckRunAs("bob", "team-a", {}).ok());  // nothing asked: the agent's run_as
  Status s = p->CheckRunAs("bob", "team-a", Asks(0, std::nullopt));
  EXPECT_EQ(s.code(), ErrorCode::kPermission);
  EXPECT_EQ(s.message(),
            "rt: c.securityContext.runAsUser: uid 0 is not allowed in namespace \"team-a\" for "
            "user \"bob\" (allowed: 1000-1999, 65534)");
  EXPECT_EQ(p->CheckRunAs("bob", "team-a", Asks(2000, std::nullopt)).code(),
            ErrorCode::kPermission);
  EXPECT_EQ(p->CheckRunAs("bob", "team-a", Asks(1500, 0)).message(),
            "rt: c.securityContext.runAsGroup: gid 0 is not allowed in namespace \"team-a\" for "
            "user \"bob\" (allowed: 1000)");
}

TEST(AccessPolicyRunAs, NoRuleAllowsNoIdsButAdminsAskAny) {
  auto p = AccessPolicy::Parse(kRunAsPolicy, "policy.yaml");
  ASSERT_TRUE(p.ok());
  // team-b has no rule, team-c an empty one: the safe default, the agent's run_as.
  for (const char* ns : {"team-b", "team-c"}) {
    Status s = p->CheckRunAs("bob", ns, Asks(1000, std::nullopt));
    EXPECT_EQ(s.code(), ErrorCode::kPermission) << ns;
    EXPECT_EQ(s.message(),
              "rt: c.securityContext.runAsUser: uid 1000 is not allowed in namespace \"" +
                  std::string(ns) +
                  "\" for user \"bob\" (the access policy allows no runAsUsers "
                  "there: ranks run as the agent's run_as)");
  }
  EXPECT_TRUE(p->CheckRunAs("alice", "team-b", Asks(0, 0)).ok());
  EXPECT_EQ(p->CheckRunAs("mallory", "team-a", Asks(1000, std::nullopt)).code(), ErrorCode::kOk);
  EXPECT_EQ(p->CheckRunAs("mallory", "team-b", Asks(1000, std::nullopt)).code(),
            ErrorCode::kPermission);
  // Without a policy file nothing is checked, as before policies.
  EXPECT_TRUE(AccessPolicy::AllAdmin().CheckRunAs("anyone", "team-b", Asks(0, 0)).ok());
}

class AccessPolicyFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("access_policy_test." + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    path_ = (dir_ / "policy.yaml").string();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  // Writes the file with a modification time that differs from the last one written.
  void Write(const std::string& text) {
    std::ofstream(path_, std::ios::trunc) << text;
    const auto t = std::filesystem::file_time_type::clock::now() + std::chrono::seconds(++bump_);
    std::filesystem::last_write_time(path_, t);
  }
  std::filesystem::path dir_;
  std::string path_;
  int bump_ = 0;
};

TEST_F(AccessPolicyFileTest, MissingFileIsAllAdminUntilItAppears) {
  auto f = AccessPolicyFile::Open(path_);
  ASSERT_TRUE(f.ok());
  EXPECT_FALSE(f->Current().enforced());
  Write("users: {bob: {role: user, namespaces: [team-a]}}\n");
  EXPECT_TRUE(f->Current().enforced());
  EXPECT_EQ(f->Current().Check("bob", Verb::kDelete, "team-b").code(), ErrorCode::kPermission);
}

TEST_F(AccessPolicyFileTest, BadFileAtStartIsAnError) {
  Write("users:\n  bob: {role: root}\n");
  auto f = AccessPolicyFile::Open(path_);
  ASSERT_FALSE(f.ok());
  EXPECT_THAT(f.status().message(), HasSubstr(path_ + ": line 2"));
  EXPECT_THAT(f.status().message(), HasSubstr("users.bob.role"));
}

TEST_F(AccessPolicyFileTest, ReloadsAndKeepsTheOldPolicyOnABadOne) {
  Write("users: {bob: {role: user, namespaces: [team-a]}}\n");
  auto f = AccessPolicyFile::Open(path_);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->Current().Check("bob", Verb::kDelete, "team-b").code(), ErrorCode::kPermission);
  Write("users: {bob: {role: user, namespaces: [team-a, team-b]}}\n");
  EXPECT_TRUE(f->Current().Check("bob", Verb::kDelete, "team-b").ok());
  Write("users: {bob: {role: superuser}}\n");  // kept: the last good one
  EXPECT_TRUE(f->Current().Check("bob", Verb::kDelete, "team-b").ok());
  EXPECT_EQ(f->Current().Check("bob", Verb::kDrain, "").code(), ErrorCode::kPermission);
  Write("users: {bob: {role: admin}}\n");
  EXPECT_TRUE(f->Current().Check("bob", Verb::kDrain, "").ok());
}

// A file rewritten in place within one tick of the kernel's coarse file clock keeps its
// modification time: `cat > policy.yaml` truncates, then writes. A reload that came between (an
// empty file: everyone refused, admins too) or after a partial write was then never followed by
// the finished file, whose mtime equalled the one already read. Here both versions get the same
// mtime, as such writes do; the second must still be read.
TEST_F(AccessPolicyFileTest, ARewriteWithTheSameModificationTimeIsReadToo) {
  const auto same = std::filesystem::file_time_type::clock::now();
  auto write_same = [&](const std::string& text) {
    std::ofstream(path_, std::ios::trunc) << text;
    std::filesystem::last_write_time(path_, same);
  };
  write_same("users: {bob: {role: user, namespaces: [team-a]}}\n");
  auto f = AccessPolicyFile::Open(path_);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->Current().Check("bob", Verb::kDelete, "team-b").code(), ErrorCode::kPermission);
  write_same("");  // truncated: read between the two writes
  EXPECT_EQ(f->Current().Check("bob", Verb::kDelete, "team-a").code(), ErrorCode::kPermission);
  write_same("users: {bob: {role: user, namespaces: [team-b]}}\n");  // same size, too
  EXPECT_TRUE(f->Current().Check("bob", Verb::kDelete, "team-b").ok());
  EXPECT_EQ(f->Current().Check("bob", Verb::kDelete, "team-a").code(), ErrorCode::kPermission);
}

// The run-as rules reload with the file, as the grants do (issue 19).
TEST_F(AccessPolicyFileTest, RunAsRulesReloadWithoutARestart) {
  Write("users: {bob: {role: user, namespaces: [team-a]}}\n");
  auto f = AccessPolicyFile::Open(path_);
  ASSERT_TRUE(f.ok());
  const std::vector<RunAsAsk> uid_1500 = {{"rt: c.securityContext.runAsUser", false, 1500}};
  EXPECT_EQ(f->Current().CheckRunAs("bob", "team-a", uid_1500).code(), ErrorCode::kPermission);
  Write(
      "users: {bob: {role: user, namespaces: [team-a]}}\n"
      "namespaces: {team-a: {runAsUsers: [\"1000-1999\"]}}\n");
  EXPECT_TRUE(f->Current().CheckRunAs("bob", "team-a", uid_1500).ok());
  Write(
      "users: {bob: {role: user, namespaces: [team-a]}}\n"
      "namespaces: {team-a: {runAsUsers: [x]}}\n");  // kept: the last good one
  EXPECT_TRUE(f->Current().CheckRunAs("bob", "team-a", uid_1500).ok());
  Write(
      "users: {bob: {role: user, namespaces: [team-a]}}\n"
      "namespaces: {team-a: {runAsUsers: [65534]}}\n");
  EXPECT_EQ(f->Current().CheckRunAs("bob", "team-a", uid_1500).code(), ErrorCode::kPermission);
}

}  // namespace
}  // namespace trainlet::coordinator
