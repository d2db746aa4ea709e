// ExecAuthority: which launcher keys may start commands, and where a trainlet-exec request runs.
#include "coordinator/exec_authority.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "coordinator/job_state_machine.h"

namespace trainlet::coordinator {
namespace {

class ExecAuthorityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* n : {"n1", "n2"}) {
      v1::NodeInfo info;
      info.set_name(n);
      info.set_hostname(std::string("host-") + n);
      info.set_address(std::string("10.0.0.") + (n[1] == '1' ? "1" : "2"));
      info.set_slots(4);
      ASSERT_TRUE(registry_
                      .Register(info, std::string("rid-") + n, std::string("key-") + n,
                                NodeRegistry::Clock::now(), 0)
                      .ok());
    }
  }
  // A job whose current attempt `attempt` is in `phase`, placed on n1 then n2, with launcher key
  // `key` in its status as a job reloaded from the store has it (NoteStoredLauncherKey).
  v1::JobStatus& AddJob(const std::string& name, JobPhase phase, uint32_t attempt,
                        const std::string& key) {
    v1::JobStatus& st = jobs_[name];
    st.set_name(name);
    st.set_job_phase(static_cast<v1::JobPhase>(phase));
    st.set_attempt(attempt);
    st.set_num_nodes(2);
    st.set_launcher_key(key);
    st.add_placement("n1");
    st.add_placement("n2");
    exec_.Track(name, {{"FOO", "bar"}});
    if (!key.empty()) exec_.NoteStoredLauncherKey(name);
    return st;
  }

  NodeRegistry registry_{std::chrono::milliseconds(1000), std::chrono::milliseconds(3000)};
  std::map<std::string, v1::JobStatus> jobs_;
  ExecAuthority exec_{&registry_,
                      {"tcp://coord:7000", "server-key", 2500},
                      [this](const std::string& job) -> const v1::JobStatus* {
                        auto it = jobs_.find(job);
                        return it == jobs_.end() ? nullptr : &it->second;
                      }};
};

TEST(AttemptActive, OnlyTheCurrentStartingOrRunningAttemptOfALiveJob) {
  v1::JobStatus st;
  st.set_attempt(2);
  for (JobPhase p : {JobPhase::kPending, JobPhase::kRestarting, JobPhase::kSucceeded,
                     JobPhase::kFailed, JobPhase::kSuspended}) {
    st.set_job_phase(static_cast<v1::JobPhase>(p));
    EXPECT_FALSE(AttemptActive(st, 2)) << JobPhaseName(p);
  }
  st.set_job_phase(v1::JOB_PHASE_RUNNING);
  EXPECT_TRUE(AttemptActive(st, 2));
  EXPECT_FALSE(AttemptActive(st, 1));
  st.set_job_phase(v1::JOB_PHASE_STARTING);
  EXPECT_TRUE(AttemptActive(st, 2));
  st.set_deleting(true);
  EXPECT_FALSE(AttemptActive(st, 2));
}

TEST_F(ExecAuthorityTest, IssuesAFreshKeyPairPerAttempt) {
  PlanRequest a, b;
  // The secret half is returned, never put in the request (it would reach the plugin).
  auto secret_a = exec_.IssueLauncherKeys(a);
  auto secret_b = exec_.IssueLauncherKeys(b);
  ASSERT_TRUE(secret_a.ok());
  ASSERT_TRUE(secret_b.ok());
  EXPECT_EQ(a.exec_endpoint, "tcp://coord:7000");
  EXPECT_EQ(a.exec_server_key, "server-key");
  EXPECT_EQ(a.launcher_public_key.size(), 40u);
  EXPECT_EQ(secret_a->z85.size(), 40u);
  EXPECT_NE(a.launcher_public_key, b.launcher_public_key);
  EXPECT_NE(secret_a->z85, secret_b->z85);
  EXPECT_NE(secret_a->z85, a.launcher_public_key);
}

TEST_F(ExecAuthorityTest, AllowlistHoldsOnlyActiveAttemptsWithAKey) {
  AddJob("running", JobPhase::kRunning, 1, "key-running");
  AddJob("starting", JobPhase::kStarting, 3, "key-starting");
  AddJob("restarting", JobPhase::kRestarting, 2, "key-restarting");
  AddJob("nokey", JobPhase::kRunning, 1, "");
  EXPECT_EQ(exec_.LauncherKeys(), (std::map<std::string, std::string>{
                                      {"key-running", "running"}, {"key-starting", "starting"}}));
  EXPECT_TRUE(exec_.AttemptActive("running", 1));
  EXPECT_FALSE(exec_.AttemptActive("running", 2));
  EXPECT_FALSE(exec_.AttemptActive("absent", 1));
}

TEST_F(ExecAuthorityTest, ResolvesAHostOfThePlacement) {
  AddJob("job", JobPhase::kRunning, 4, "key-job");
  exec_.SetLauncherSecret("job", "secret-4");
  EXPECT_EQ(exec_.SecretOf("job").z85, "secret-4");  // what RenderAttempt gets once ports are held
  EXPECT_TRUE(exec_.SecretOf("absent").z85.empty());
  for (const std::string host : {"n2", "host-n2", "10.0.0.2"}) {
    auto t = exec_.ResolveExec("key-job", host);
    ASSERT_TRUE(t.ok()) << host << ": " << t.status().ToString();
    EXPECT_EQ(t->job, "job");
    EXPECT_EQ(t->attempt, 4u);
    EXPECT_EQ(t->node, "n2");
    EXPECT_EQ(t->stop_grace_ms, 2500u);
    EXPECT_EQ(t->env.at("TRAINLET_NODE_RANK"), "1");
    EXPECT_EQ(t->env.at("FOO"), "bar");
    EXPECT_EQ(t->env.at("TRAINLET_NUM_NODES"), "2");
    EXPECT_EQ(t->env.at("TRAINLET_EXEC_KEY"), "secret-4");
    EXPECT_EQ(t->env.at("TRAINLET_EXEC_PUBLIC_KEY"), "key-job");
    EXPECT_EQ(t->env.at("TRAINLET_EXEC_ENDPOINT"), "tcp://coord:7000");
  }
}

// issue 19: a remote command (an orted) runs as the job's ranks do: its securityContext user (and
// its pod's fsGroup) travels with the target; a job without one leaves it to the agent's run_as.
TEST_F(ExecAuthorityTest, TheTargetCarriesTheJobsSecurityContextUser) {
  AddJob("plain", JobPhase::kRunning, 1, "key-plain");
  AddJob("asuser", JobPhase::kRunning, 1, "key-asuser");
  exec_.Track("asuser", {}, 4000, 100, true, 4242);
  auto plain = exec_.ResolveExec("key-plain", "n2");
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(plain->run_as_user.has_value());
  EXPECT_FALSE(plain->run_as_group.has_value());
  auto t = exec_.ResolveExec("key-asuser", "n2");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->run_as_user, std::optional<int64_t>(4000));
  EXPECT_EQ(t->run_as_group, std::optional<int64_t>(100));
  EXPECT_EQ(t->allow_privilege_escalation, std::optional<bool>(true));
  EXPECT_FALSE(plain->allow_privilege_escalation.has_value());
  EXPECT_EQ(t->fs_group, std::optional<int64_t>(4242));  // its pod's fsGroup, as its ranks get
  EXPECT_FALSE(plain->fs_group.has_value());
}

TEST_F(ExecAuthorityTest, RefusesUnknownKeysStoppedAttemptsAndForeignHosts) {
  AddJob("job", JobPhase::kRunning, 1, "key-job");
  auto unknown = exec_.ResolveExec("key-other", "n1");
  EXPECT_EQ(unknown.status().code(), ErrorCode::kPermission);
  EXPECT_NE(unknown.status().message().find("not the launcher key"), std::string::npos);
  EXPECT_EQ(exec_.ResolveExec("", "n1").status().code(), ErrorCode::kPermission);

  auto foreign = exec_.ResolveExec("key-job", "n9");
  EXPECT_EQ(foreign.status().code(), ErrorCode::kPermission);
  EXPECT_NE(foreign.status().message().find("host n9 is not in the placement of trainjob/job"),
            std::string::npos);

  jobs_["job"].set_job_phase(v1::JOB_PHASE_RESTARTING);
  auto stopped = exec_.ResolveExec("key-job", "n1");
  EXPECT_EQ(stopped.status().code(), ErrorCode::kPermission);
  EXPECT_NE(stopped.status().message().find("is Restarting, not running"), std::string::npos);
}

// LauncherKeys runs once per loop pass that changed a job: it looks only at the jobs given a key,
// by an attempt's secret or by the stored status of a reloaded job, not at every job held.
TEST_F(ExecAuthorityTest, OnlyJobsGivenAKeyAreLookedAt) {
  v1::JobStatus& st = jobs_["fresh"];
  st.set_name("fresh");
  st.set_job_phase(v1::JOB_PHASE_RUNNING);
  st.set_attempt(1);
  st.add_placement("n1");
  exec_.Track("fresh", {});
  exec_.SetLauncherSecret("fresh", "");  // an attempt without a launcher
  st.set_launcher_key("key-fresh");      // a key no attempt was issued: not looked at
  EXPECT_TRUE(exec_.LauncherKeys().empty());
  EXPECT_FALSE(exec_.ResolveExec("key-fresh", "n1").ok());
  exec_.SetLauncherSecret("fresh", "secret-1");  // the attempt's launcher key was issued
  EXPECT_EQ(exec_.LauncherKeys(), (std::map<std::string, std::string>{{"key-fresh", "fresh"}}));
  EXPECT_TRUE(exec_.ResolveExec("key-fresh", "n1").ok());
  exec_.NoteStoredLauncherKey("unknown");  // not a job held: ignored
  EXPECT_EQ(exec_.LauncherKeys().size(), 1u);
}

TEST_F(ExecAuthorityTest, AForgottenJobIsNoLongerKnown) {
  AddJob("job", JobPhase::kRunning, 1, "key-job");
  exec_.Forget("job");
  EXPECT_TRUE(exec_.LauncherKeys().empty());
  EXPECT_FALSE(exec_.ResolveExec("key-job", "n1").ok());
}

}  // namespace
}  // namespace trainlet::coordinator
