// A rank's secret files and job dirs (agent/step/rank_files.h): secrets leave the env for 0400
// files; as root, the files and the job's dirs belong to the rank's user, the agent's own dirs
// on the way are opened for search, and a dir above them that the user cannot search is named.
#include "agent/step/rank_files.h"

#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <pwd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "agent/step/spare_files.h"
#include "tests/common/test_dir.h"

namespace trainlet::step {
namespace {

namespace fs = std::filesystem;

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

bool Has(const std::vector<std::string>& env, const std::string& prefix) {
  for (const auto& kv : env) {
    if (kv.rfind(prefix, 0) == 0) return true;
  }
  return false;
}

std::optional<RankIdentity> User(const char* name) {
  const passwd* pw = getpwnam(name);
  if (pw == nullptr) return std::nullopt;
  return RankIdentity{pw->pw_uid, pw->pw_gid, {pw->pw_gid}, name, "run_as"};
}
std::optional<RankIdentity> Nobody() { return User("nobody"); }

// Whether `what` returns true in a child that drops to `who` as trainlet-step --as does.
template <typename Fn>
bool AsUser(const RankIdentity& who, Fn&& what) {
  const pid_t pid = fork();
  if (pid == 0) {
    if (setgroups(who.groups.size(), who.groups.data()) != 0 || setgid(who.gid) != 0 ||
        setuid(who.uid) != 0) {
      _exit(2);
    }
    _exit(what() ? 0 : 1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// Whether `who` can open `path` (a file to read, or a dir to list).
bool CanOpen(const RankIdentity& who, const std::string& path) {
  // O_RDONLY needs read permission, on a dir too (0711: searchable, not listable).
  return AsUser(who, [&] { return open(path.c_str(), O_RDONLY | O_CLOEXEC) >= 0; });
}

TEST(RankFiles, AnEnvWithoutSecretsIsLeftAsIs) {
  std::vector<std::string> env = {"PATH=/bin", "TRAINLET_RENDEZVOUS_ENDPOINT=tcp://x:1"};
  const auto before = env;
  auto written = MoveSecretsToFiles(env, "s1-r0", std::nullopt);
  ASSERT_TRUE(written.ok()) << written.status().message();
  EXPECT_TRUE(written->empty());
  EXPECT_EQ(env, before);
}

TEST(RankFiles, SecretsMoveIntoPrivateFiles) {
  testing::TempDir dir;
  std::vector<std::string> env = {"PATH=/bin", "TRAINLET_WORK_DIR=" + dir.path(),
                                  "TRAINLET_RENDEZVOUS_TOKEN=tok-123", "TRAINLET_EXEC_KEY=key-456",
                                  "TRAINLET_EXEC_KEY_FILE=/etc/passwd"};
  auto written = MoveSecretsToFiles(env, "s9-r3", std::nullopt);
  ASSERT_TRUE(written.ok()) << written.status().message();
  ASSERT_EQ(written->size(), 2u);
  EXPECT_FALSE(Has(env, "TRAINLET_RENDEZVOUS_TOKEN="));
  EXPECT_FALSE(Has(env, "TRAINLET_EXEC_KEY="));
  EXPECT_FALSE(Has(env, "TRAINLET_EXEC_KEY_FILE=/etc/passwd"));  // ours replaced the rank's own
  const std::string top = dir.path() + "/.trainlet-secrets";
  const std::string secrets = top + "/uid-" + std::to_string(geteuid());
  const std::string token = secrets + "/s9-r3.TRAINLET_RENDEZVOUS_TOKEN";
  const std::string key = secrets + "/s9-r3.TRAINLET_EXEC_KEY";
  EXPECT_TRUE(Has(env, "TRAINLET_RENDEZVOUS_TOKEN_FILE=" + token));
  EXPECT_TRUE(Has(env, "TRAINLET_EXEC_KEY_FILE=" + key));
  EXPECT_EQ(EnvValue(env, "TRAINLET_EXEC_KEY_FILE"), key);
  EXPECT_EQ(Slurp(token), "tok-123");
  EXPECT_EQ(Slurp(key), "key-456");
  struct stat st {};
  ASSERT_EQ(stat(token.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0400u);
  ASSERT_EQ(stat(secrets.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  ASSERT_EQ(stat(top.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0711u);  // the step's: each user reaches its own dir, lists none
  // A second step of the same attempt writes its own files; the first one's stay.
  std::vector<std::string> again = {"TRAINLET_WORK_DIR=" + dir.path(), "TRAINLET_EXEC_KEY=k2"};
  ASSERT_TRUE(MoveSecretsToFiles(again, "s10-r3", std::nullopt).ok());
  EXPECT_EQ(Slurp(key), "key-456");
  RemoveSecretFiles(*written);
  EXPECT_FALSE(fs::exists(token));
  EXPECT_FALSE(fs::exists(key));
}

ino_t InodeOf(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 ? st.st_ino : 0;
}

// A step's ranks that carry the same secret get hard links to one file: names of their own, the
// same contents and mode, one inode. Removing one name leaves the others readable.
TEST(RankFiles, RanksWithTheSameSecretShareOneInode) {
  testing::TempDir dir;
  SecretFileLinks links;
  auto env_of = [&](const std::string& token) {
    return std::vector<std::string>{"TRAINLET_WORK_DIR=" + dir.path(),
                                    "TRAINLET_RENDEZVOUS_TOKEN=" + token};
  };
  std::vector<std::string> r0 = env_of("tok"), r1 = env_of("tok"), r2 = env_of("other");
  auto w0 = MoveSecretsToFiles(r0, "s7-r0", std::nullopt, "", &links);
  auto w1 = MoveSecretsToFiles(r1, "s7-r1", std::nullopt, "", &links);
  auto w2 = MoveSecretsToFiles(r2, "s7-r2", std::nullopt, "", &links);
  ASSERT_TRUE(w0.ok() && w1.ok() && w2.ok());
  const std::string f0 = (*w0)[0], f1 = (*w1)[0], f2 = (*w2)[0];
  EXPECT_EQ(f1, dir.path() + "/.trainlet-secrets/uid-" + std::to_string(geteuid()) +
                    "/s7-r1.TRAINLET_RENDEZVOUS_TOKEN");
  EXPECT_EQ(EnvValue(r1, "TRAINLET_RENDEZVOUS_TOKEN_FILE"), f1);
  EXPECT_EQ(Slurp(f1), "tok");
  EXPECT_EQ(Slurp(f2), "other");
  ASSERT_NE(InodeOf(f0), 0u);
#ifdef __linux__
  EXPECT_EQ(InodeOf(f1), InodeOf(f0));  // a link, not a second file
#endif
  EXPECT_NE(InodeOf(f2), InodeOf(f0));  // another secret: a file of its own
  struct stat st {};
  ASSERT_EQ(stat(f1.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0400u);
  EXPECT_EQ(links.size(), 2u);
  RemoveSecretFiles(*w0);
  EXPECT_EQ(Slurp(f1), "tok");
}

// The secrets dir is made ready (made, opened, given to its user) once per step and work dir: the
// next rank writes into the dir kept open. A name that a step of the same pid left behind is
// replaced by the link, never written through.
TEST(RankFiles, RanksOfOneStepShareTheReadySecretsDir) {
  testing::TempDir dir;
  SecretFileLinks links;
  const std::string secrets = dir.path() + "/.trainlet-secrets/uid-" + std::to_string(geteuid());
  std::vector<std::string> r0 = {"TRAINLET_WORK_DIR=" + dir.path(), "TRAINLET_EXEC_KEY=k"};
  std::vector<std::string> r1 = r0;
  EXPECT_LT(links.FindDir(secrets, geteuid(), getegid()), 0);
  auto w0 = MoveSecretsToFiles(r0, "s9-r0", std::nullopt, "", &links);
  ASSERT_TRUE(w0.ok()) << w0.status().message();
  EXPECT_GE(links.FindDir(secrets, geteuid(), getegid()), 0);
  EXPECT_LT(links.FindDir(secrets, geteuid() + 1, getegid()), 0);  // another user: made ready anew
  const std::string stale = secrets + "/s9-r1.TRAINLET_EXEC_KEY";
  { std::ofstream(stale) << "stale"; }
  const ino_t stale_inode = InodeOf(stale);
  auto w1 = MoveSecretsToFiles(r1, "s9-r1", std::nullopt, "", &links);
  ASSERT_TRUE(w1.ok()) << w1.status().message();
  EXPECT_EQ((*w1)[0], stale);
  EXPECT_EQ(Slurp(stale), "k");
  EXPECT_NE(InodeOf(stale), stale_inode);
  struct stat st {};
  ASSERT_EQ(stat(secrets.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
}

// Once every name of the kept file is gone there is nothing to link to: the next rank gets a new
// file with the secret, not an error.
TEST(RankFiles, AFileWhoseNamesAreGoneIsWrittenAgain) {
  testing::TempDir dir;
  SecretFileLinks links;
  std::vector<std::string> r0 = {"TRAINLET_WORK_DIR=" + dir.path(), "TRAINLET_EXEC_KEY=k"};
  std::vector<std::string> r1 = r0;
  auto w0 = MoveSecretsToFiles(r0, "s8-r0", std::nullopt, "", &links);
  ASSERT_TRUE(w0.ok());
  RemoveSecretFiles(*w0);
  auto w1 = MoveSecretsToFiles(r1, "s8-r1", std::nullopt, "", &links);
  ASSERT_TRUE(w1.ok()) << w1.status().message();
  EXPECT_EQ(Slurp((*w1)[0]), "k");
  EXPECT_EQ(links.size(), 1u);
}

// With spares (spare_files.h), the first rank's secret file and the two secrets dirs are spares
// renamed into place, not new inodes on the launch's path: the file still 0400 with the secret,
// the dirs still 0711 (the step's) and 0700 (the user's); the next rank's file is a hard link.
TEST(RankFiles, TheFirstSecretFileAndTheSecretsDirsAreSpares) {
  testing::TempDir dir;
  const std::string spare = dir.File("spare-files");
  SpareFileFiller filler(spare);
  filler.Want(2, 2);
  filler.WaitIdle();
  std::set<ino_t> spares;
  for (const auto& e : fs::recursive_directory_iterator(spare)) {
    if (e.path().filename() != ".dirs" && e.path().filename() != ".fill")
      spares.insert(InodeOf(e.path().string()));
  }
  ASSERT_EQ(spares.size(), 4u);
  const std::string work = dir.File("work");
  fs::create_directories(work);
  SpareFiles taker(spare);
  SecretFileLinks links;
  links.UseSpares(&taker);
  std::vector<std::string> r0 = {"TRAINLET_WORK_DIR=" + work, "TRAINLET_RENDEZVOUS_TOKEN=tok"};
  std::vector<std::string> r1 = r0;
  auto w0 = MoveSecretsToFiles(r0, "s3-r0", std::nullopt, "", &links);
  auto w1 = MoveSecretsToFiles(r1, "s3-r1", std::nullopt, "", &links);
  ASSERT_TRUE(w0.ok() && w1.ok());
  const std::string secrets = work + "/" + kSecretsDirName;
  const std::string mine = secrets + "/" + UserSecretsDirName(geteuid());
  EXPECT_TRUE(spares.contains(InodeOf((*w0)[0])));
  EXPECT_TRUE(spares.contains(InodeOf(secrets)));
  EXPECT_TRUE(spares.contains(InodeOf(mine)));
  EXPECT_EQ(InodeOf((*w1)[0]), InodeOf((*w0)[0]));  // a link to the first
  EXPECT_EQ(Slurp((*w0)[0]), "tok");
  for (const auto& [path, mode] :
       {std::pair{(*w0)[0], 0400u}, std::pair{secrets, 0711u}, std::pair{mine, 0700u}}) {
    struct stat st {};
    ASSERT_EQ(stat(path.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, mode) << path;
  }
}

TEST(RankFiles, SecretsWithoutAWorkDirRefuseTheStart) {
  std::vector<std::string> env = {"TRAINLET_RENDEZVOUS_TOKEN=t"};
  auto written = MoveSecretsToFiles(env, "s1-r0", std::nullopt);
  ASSERT_FALSE(written.ok());
  EXPECT_NE(written.status().message().find("TRAINLET_WORK_DIR"), std::string::npos);
  env = {"TRAINLET_RENDEZVOUS_TOKEN=t", "TRAINLET_WORK_DIR=/nonexistent/trainlet"};
  written = MoveSecretsToFiles(env, "s1-r0", std::nullopt);
  ASSERT_FALSE(written.ok());
  EXPECT_NE(written.status().message().find("/nonexistent/trainlet"), std::string::npos);
}

TEST(RankFiles, SecretsDirThatIsASymlinkIsRefused) {
  testing::TempDir dir;
  testing::TempDir elsewhere;
  fs::create_directory_symlink(elsewhere.path(), dir.path() + "/.trainlet-secrets");
  std::vector<std::string> env = {"TRAINLET_WORK_DIR=" + dir.path(), "TRAINLET_EXEC_KEY=k"};
  EXPECT_FALSE(MoveSecretsToFiles(env, "s1-r0", std::nullopt).ok());
  EXPECT_TRUE(fs::is_empty(elsewhere.path()));
}

TEST(RankFiles, AsRootTheFilesAndDirsBelongToTheRankUser) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to give files to another user";
  const auto nobody = Nobody();
  if (!nobody) GTEST_SKIP() << "no user nobody here";
  testing::TempDir root;
  // <root>/state/work/job/workspace/{dataset,model}, all 0700 root, as the agent makes them;
  // <root> itself opened for search, as an operator would.
  const std::string state = root.path() + "/state";
  const std::string work = state + "/work/job";
  fs::create_directories(work + "/workspace/dataset");
  fs::create_directories(work + "/workspace/model");
  for (const std::string& d : {state, state + "/work", work, work + "/workspace"}) {
    chmod(d.c_str(), 0700);
  }
  chmod(root.path().c_str(), 0711);
  ASSERT_TRUE(GiveJobDirs(work, state, *nobody).ok());
  for (const std::string& d :
       {work, work + "/workspace", work + "/workspace/dataset", work + "/workspace/model"}) {
    struct stat st {};
    ASSERT_EQ(stat(d.c_str(), &st), 0);
    EXPECT_EQ(st.st_uid, nobody->uid) << d;
    EXPECT_EQ(st.st_mode & 07777, 0700u) << d;
  }
  for (const std::string& d : {state, state + "/work"}) {
    struct stat st {};
    ASSERT_EQ(stat(d.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0711u) << d;  // searchable, still not listable
  }
  std::vector<std::string> env = {"TRAINLET_WORK_DIR=" + work, "TRAINLET_RENDEZVOUS_TOKEN=t"};
  auto written = MoveSecretsToFiles(env, "s1-r0", nobody);
  ASSERT_TRUE(written.ok()) << written.status().message();
  struct stat st {};
  ASSERT_EQ(stat((*written)[0].c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, nobody->uid);
  EXPECT_EQ(st.st_mode & 07777, 0400u);

  // A dir above the agent's state dir that the user cannot search is named, and left alone.
  chmod(root.path().c_str(), 0700);
  Status st2 = GiveJobDirs(work, state, *nobody);
  ASSERT_FALSE(st2.ok());
  EXPECT_NE(st2.message().find("run_as: uid " + std::to_string(nobody->uid) +
                               " cannot reach its work dir"),
            std::string::npos)
      << st2.message();
  EXPECT_NE(st2.message().find(root.path() + " (mode 0700"), std::string::npos) << st2.message();
  ASSERT_EQ(stat(root.path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
}

// issue 19: the progress endpoint's CA file and the attempt's token live in the agent's 0700
// progress dir. A rank of another user gets its own 0400 copies, named by the same variables; a
// path the job itself put there (the agent's key) is never read, and a root rank keeps the paths.
TEST(RankFiles, AgentFilesAreCopiedForARankOfAnotherUserOnly) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to give files to another user";
  const auto nobody = Nobody();
  if (!nobody) GTEST_SKIP() << "no user nobody here";
  testing::TempDir root;
  const std::string state = root.path() + "/state";
  const std::string work = state + "/work/job";
  fs::create_directories(work);
  fs::create_directories(state + "/progress/tokens");
  const std::string ca = state + "/progress/ca.crt";
  const std::string token = state + "/progress/tokens/job.attempt-2";
  const std::string key = state + "/agent.key";
  for (const auto& [path, text] :
       {std::pair{ca, std::string("CA PEM")}, {token, "tok-2"}, {key, "agent secret"}}) {
    std::ofstream(path) << text;
    chmod(path.c_str(), 0600);
  }
  const std::vector<std::string> base = {"TRAINLET_WORK_DIR=" + work, "TRAINLET_JOB=job",
                                         "TRAINLET_ATTEMPT=2"};
  std::vector<std::string> env = base;
  env.push_back("KUBEFLOW_TRAINER_SERVER_CA_CERT=" + ca);
  env.push_back("KUBEFLOW_TRAINER_SERVER_TOKEN=" + token);
  auto written = MoveSecretsToFiles(env, "s1-r0", nobody, state);
  ASSERT_TRUE(written.ok()) << written.status().message();
  ASSERT_EQ(written->size(), 2u);
  const std::string ca_copy = EnvValue(env, "KUBEFLOW_TRAINER_SERVER_CA_CERT");
  const std::string token_copy = EnvValue(env, "KUBEFLOW_TRAINER_SERVER_TOKEN");
  for (const auto& [copy, text] :
       {std::pair{ca_copy, std::string("CA PEM")}, {token_copy, "tok-2"}}) {
    EXPECT_EQ(
        copy.rfind(work + "/.trainlet-secrets/uid-" + std::to_string(nobody->uid) + "/s1-r0.", 0),
        0u)
        << copy;
    EXPECT_EQ(Slurp(copy), text);
    struct stat st {};
    ASSERT_EQ(stat(copy.c_str(), &st), 0);
    EXPECT_EQ(st.st_uid, nobody->uid) << copy;
    EXPECT_EQ(st.st_mode & 07777, 0400u) << copy;
  }

  // A path the job named, or another attempt's token: left as is, not read.
  env = base;
  env.push_back("KUBEFLOW_TRAINER_SERVER_CA_CERT=" + key);
  env.push_back("KUBEFLOW_TRAINER_SERVER_TOKEN=" + state + "/progress/tokens/job.attempt-1");
  written = MoveSecretsToFiles(env, "s1-r1", nobody, state);
  ASSERT_TRUE(written.ok()) << written.status().message();
  EXPECT_TRUE(written->empty());
  EXPECT_EQ(EnvValue(env, "KUBEFLOW_TRAINER_SERVER_CA_CERT"), key);

  // A rank of the agent's own user reads the agent's files where they are.
  env = base;
  env.push_back("KUBEFLOW_TRAINER_SERVER_TOKEN=" + token);
  written = MoveSecretsToFiles(env, "s1-r2", std::nullopt, state);
  ASSERT_TRUE(written.ok());
  EXPECT_TRUE(written->empty());
  EXPECT_EQ(EnvValue(env, "KUBEFLOW_TRAINER_SERVER_TOKEN"), token);
}

// issue 19: the node cache (0700, the agent's) gets a dir per user, that user's only.
TEST(RankFiles, ARankOfAnotherUserGetsItsOwnDirInTheNodeCache) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to give files to another user";
  const auto nobody = Nobody();
  if (!nobody) GTEST_SKIP() << "no user nobody here";
  testing::TempDir root;
  const std::string cache = root.path() + "/cache";
  fs::create_directories(cache + "/uid-0");
  chmod(cache.c_str(), 0700);
  // A cache dir that is not the agent's (a job set the variable) is left alone.
  std::vector<std::string> env = {"TRAINLET_CACHE_DIR=" + cache, "A=b"};
  ASSERT_TRUE(GiveNodeCache(env, root.path() + "/other-state", *nobody).ok());
  EXPECT_EQ(EnvValue(env, "TRAINLET_CACHE_DIR"), cache);
  struct stat st {};
  ASSERT_EQ(stat(cache.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  ASSERT_TRUE(GiveNodeCache(env, root.path(), *nobody).ok());
  const std::string mine = cache + "/uid-" + std::to_string(nobody->uid);
  EXPECT_EQ(EnvValue(env, "TRAINLET_CACHE_DIR"), mine);
  ASSERT_EQ(stat(mine.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, nobody->uid);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  ASSERT_EQ(stat(cache.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0711u);  // searchable, not listable
  env = {"TRAINLET_CACHE_DIR=" + cache};
  ASSERT_TRUE(GiveNodeCache(env, root.path(), *nobody).ok());  // again

  // A link in its place (left by someone) is refused, not followed.
  fs::remove(mine);
  fs::create_directory_symlink(root.path(), mine);
  env = {"TRAINLET_CACHE_DIR=" + cache};
  Status linked = GiveNodeCache(env, root.path(), *nobody);
  EXPECT_FALSE(linked.ok());
  ASSERT_EQ(stat(root.path().c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0u);
}

// Ranks of two users in one work dir at once: each user's secrets in a dir of its own (0700), the
// secrets dir itself the step's (0711). One user cannot read the other's token, nor list the
// secrets dir; each reads its own.
TEST(RankFiles, TwoUsersInOneWorkDirEachReadOnlyTheirOwnSecrets) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to give files to other users";
  const auto a = Nobody(), b = User("daemon");
  if (!a || !b) GTEST_SKIP() << "no users nobody and daemon here";
  testing::TempDir root;
  chmod(root.path().c_str(), 0755);
  const std::string work = root.path() + "/work";
  fs::create_directories(work);
  chmod(work.c_str(), 0777);  // what the work dir's owner or group would allow: not the point
  std::vector<std::string> ea = {"TRAINLET_WORK_DIR=" + work, "TRAINLET_RENDEZVOUS_TOKEN=ta"};
  std::vector<std::string> eb = {"TRAINLET_WORK_DIR=" + work, "TRAINLET_RENDEZVOUS_TOKEN=tb",
                                 "TRAINLET_EXEC_KEY=kb"};
  SecretFileLinks links;
  auto wa = MoveSecretsToFiles(ea, "s1-r0", a, "", &links);
  auto wb = MoveSecretsToFiles(eb, "s1-r1", b, "", &links);
  ASSERT_TRUE(wa.ok()) << wa.status().message();
  ASSERT_TRUE(wb.ok()) << wb.status().message();
  const std::string ta = EnvValue(ea, "TRAINLET_RENDEZVOUS_TOKEN_FILE");
  const std::string tb = EnvValue(eb, "TRAINLET_RENDEZVOUS_TOKEN_FILE");
  const std::string kb = EnvValue(eb, "TRAINLET_EXEC_KEY_FILE");
  EXPECT_EQ(ta, work + "/.trainlet-secrets/uid-" + std::to_string(a->uid) + "/s1-r0." +
                    "TRAINLET_RENDEZVOUS_TOKEN");
  EXPECT_EQ(Slurp(ta), "ta");
  EXPECT_EQ(Slurp(tb), "tb");
  EXPECT_TRUE(CanOpen(*a, ta));
  EXPECT_TRUE(CanOpen(*b, tb));
  EXPECT_TRUE(CanOpen(*b, kb));
  EXPECT_FALSE(CanOpen(*a, tb)) << "nobody read daemon's token";
  EXPECT_FALSE(CanOpen(*a, kb)) << "nobody read daemon's launcher key";
  EXPECT_FALSE(CanOpen(*b, ta)) << "daemon read nobody's token";
  EXPECT_FALSE(CanOpen(*a, work + "/.trainlet-secrets")) << "nobody listed the secrets dir";
  EXPECT_FALSE(CanOpen(*b, work + "/.trainlet-secrets/uid-" + std::to_string(a->uid)));
  struct stat st {};
  ASSERT_EQ(stat((work + "/.trainlet-secrets").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0u);
  EXPECT_EQ(st.st_mode & 07777, 0711u);
  ASSERT_EQ(stat((work + "/.trainlet-secrets/uid-" + std::to_string(b->uid)).c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, b->uid);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
}

// A secrets dir a user holds (an older agent gave it to the rank's user, or a rank made one) is
// taken back by the step before anything is written in it.
TEST(RankFiles, ASecretsDirOfAUserIsTakenBackByTheStep) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to give files to other users";
  const auto a = Nobody(), b = User("daemon");
  if (!a || !b) GTEST_SKIP() << "no users nobody and daemon here";
  testing::TempDir root;
  const std::string work = root.path();
  const std::string top = work + "/.trainlet-secrets";
  ASSERT_TRUE(fs::create_directories(top + "/uid-" + std::to_string(b->uid)));
  ASSERT_EQ(chown(top.c_str(), a->uid, a->gid), 0);
  ASSERT_EQ(chown((top + "/uid-" + std::to_string(b->uid)).c_str(), a->uid, a->gid), 0);
  std::vector<std::string> eb = {"TRAINLET_WORK_DIR=" + work, "TRAINLET_RENDEZVOUS_TOKEN=tb"};
  ASSERT_TRUE(MoveSecretsToFiles(eb, "s1-r1", b).ok());
  struct stat st {};
  ASSERT_EQ(stat(top.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0u);
  EXPECT_EQ(st.st_mode & 07777, 0711u);
  ASSERT_EQ(stat((top + "/uid-" + std::to_string(b->uid)).c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, b->uid);  // nobody's no more
  EXPECT_EQ(st.st_mode & 07777, 0700u);
}

// With securityContext.fsGroup the job's dirs are the group's: the step's, group fsGroup, 2770;
// the work dir 3770, so that no member can rename the step's .trainlet-secrets away.
TEST(RankFiles, WithAnFsGroupTheJobDirsAreSharedThroughIt) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to give files to another user";
  auto nobody = Nobody();
  if (!nobody) GTEST_SKIP() << "no user nobody here";
  nobody->fs_group = 4242;
  nobody->groups.push_back(4242);
  testing::TempDir root;
  const std::string work = root.path() + "/work/job";
  fs::create_directories(work + "/workspace/dataset");
  fs::create_directories(work + "/workspace/model");
  chmod(root.path().c_str(), 0711);
  chmod((root.path() + "/work").c_str(), 0711);
  ASSERT_TRUE(GiveJobDirs(work, "", *nobody).ok());
  for (const std::string& d :
       {work, work + "/workspace", work + "/workspace/dataset", work + "/workspace/model"}) {
    struct stat st {};
    ASSERT_EQ(stat(d.c_str(), &st), 0);
    EXPECT_EQ(st.st_uid, 0u) << d;
    EXPECT_EQ(st.st_gid, 4242u) << d;
    EXPECT_EQ(st.st_mode & 07777, d == work ? 03770u : 02770u) << d;
  }
  EXPECT_TRUE(CanOpen(*nobody, work + "/workspace/model"));
  // A member may make its own entries in the work dir, but not move the step's.
  ASSERT_EQ(mkdir((work + "/.trainlet-secrets").c_str(), 0711), 0);
  EXPECT_TRUE(AsUser(*nobody, [&] { return mkdir((work + "/mine").c_str(), 0700) == 0; }));
  EXPECT_FALSE(AsUser(*nobody, [&] {
    return rename((work + "/.trainlet-secrets").c_str(), (work + "/moved").c_str()) == 0;
  }));
  EXPECT_TRUE(fs::is_directory(work + "/.trainlet-secrets"));
}

}  // namespace
}  // namespace trainlet::step
