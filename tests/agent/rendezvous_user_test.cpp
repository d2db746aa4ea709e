#include "agent/rendezvous_user.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <map>

namespace trainlet::agent {
namespace {

using step::Account;
using step::AccountLookup;
using step::RunAsRequest;

// root (0), daemon (1, group 1) and nobody (65534, group 65534).
AccountLookup FakeAccounts() {
  static const std::map<std::string, Account> accounts = {
      {"root", {"root", 0, 0}}, {"daemon", {"daemon", 1, 1}}, {"nobody", {"nobody", 65534, 65534}}};
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
  lookup.group_by_name = [](const std::string&) -> std::optional<gid_t> { return std::nullopt; };
  lookup.groups_of = [](const Account& a) { return std::vector<gid_t>{a.gid}; };
  return lookup;
}

TEST(RendezvousUserTest, AnotherUserThanTheAgentsGetsOne) {
  RunAsRequest job;
  job.job_run_as_user = 65534;
  EXPECT_EQ(RendezvousUserFor(job, 0, FakeAccounts()), (RendezvousUser{65534, 65534}));
  RunAsRequest agent;
  agent.agent_run_as = "nobody";
  EXPECT_EQ(RendezvousUserFor(agent, 0, FakeAccounts()), (RendezvousUser{65534, 65534}));
  RunAsRequest group_too;
  group_too.job_run_as_user = 65534;
  group_too.job_run_as_group = 4000;
  EXPECT_EQ(RendezvousUserFor(group_too, 0, FakeAccounts()), (RendezvousUser{65534, 4000}));
}

TEST(RendezvousUserTest, TheAgentsOwnUserOrARefusedRequestGetsNone) {
  EXPECT_EQ(RendezvousUserFor(RunAsRequest{}, 0, FakeAccounts()), std::nullopt);
  RunAsRequest root;
  root.job_run_as_user = 0;
  EXPECT_EQ(RendezvousUserFor(root, 0, FakeAccounts()), std::nullopt);
  RunAsRequest ghost;
  ghost.agent_run_as = "ghost";  // the step refuses it: no endpoint needed
  EXPECT_EQ(RendezvousUserFor(ghost, 0, FakeAccounts()), std::nullopt);
  RunAsRequest as_self;
  as_self.job_run_as_user = 65534;  // an agent that is nobody already
  EXPECT_EQ(RendezvousUserFor(as_self, 65534, FakeAccounts()), std::nullopt);
}

TEST(RendezvousUserTest, TrainingUserIsTheFirstWorkerOutsideAStep) {
  v1::LaunchPlan plan;
  auto* init = plan.add_workers();
  init->set_step("dataset-initializer");  // its own securityContext does not count
  auto* rank = plan.add_workers();
  rank->set_run_as_user(::geteuid() == 0 ? 65534 : ::geteuid());
  const auto user = TrainingUser(plan, "");
  if (::geteuid() == 0) {
    ASSERT_TRUE(user.has_value());
    EXPECT_EQ(user->uid, 65534u);
  } else {
    EXPECT_EQ(user, std::nullopt);  // the agent's own user
  }
  EXPECT_EQ(TrainingUser(v1::LaunchPlan{}, ""), std::nullopt);
}

// A step's rank as its launch file holds it.
step::StepRank LaunchedRank(uint32_t rank, const std::string& step, uint32_t uid,
                            const std::string& token) {
  step::StepRank r;
  r.rank = rank;
  r.step = step;
  r.run_as.job_run_as_user = uid;
  if (!token.empty()) r.env["TRAINLET_RENDEZVOUS_TOKEN"] = token;
  return r;
}

// A restarted agent gives an adopted step's ranks back what AddAttempt gave them: the ranks of the
// main replicated job (not an initializer's: it takes part in no fence, and its own
// securityContext does not say who the training runs as), with their user's endpoint, whatever
// order the launch file lists them in.
TEST(RendezvousUserTest, AnAdoptedStepsRendezvousIsItsTrainingRanksWithTheirUser) {
  step::StepLaunch launch;
  launch.ranks.push_back(LaunchedRank(2, "prep", 1, "tok"));  // as daemon, listed first
  launch.ranks.push_back(LaunchedRank(0, "", 65534, "tok"));
  launch.ranks.push_back(LaunchedRank(1, "", 65534, "tok"));
  launch.ranks.push_back(LaunchedRank(1u << 30, "", 65534, ""));  // an exec session: no token
  const AdoptedRendezvous adopted = AdoptedRendezvousOf(launch, 0, FakeAccounts());
  EXPECT_EQ(adopted.token, "tok");
  EXPECT_EQ(adopted.ranks, (std::vector<uint32_t>{0, 1}));
  EXPECT_EQ(adopted.user, (RendezvousUser{65534, 65534}));
  // Ranks as the agent's own user: no endpoint of their own.
  EXPECT_EQ(AdoptedRendezvousOf(launch, 65534, FakeAccounts()).user, std::nullopt);
  // A step of only an initializer's ranks: nothing to restore.
  step::StepLaunch init;
  init.ranks.push_back(LaunchedRank(2, "prep", 1, "tok"));
  EXPECT_EQ(AdoptedRendezvousOf(init, 0, FakeAccounts()), AdoptedRendezvous{});
}

TEST(RendezvousUserTest, AnotherStepOfTheAttemptAddsItsRanks) {
  AdoptedRendezvous into;
  MergeAdoptedRendezvous(into, {"tok", {0}, std::nullopt});
  MergeAdoptedRendezvous(into, {"tok", {1, 0}, RendezvousUser{65534, 65534}});
  MergeAdoptedRendezvous(into, {"other", {7}, RendezvousUser{1, 1}});  // not its token
  EXPECT_EQ(into, (AdoptedRendezvous{"tok", {0, 1}, RendezvousUser{65534, 65534}}));
}

}  // namespace
}  // namespace trainlet::agent
