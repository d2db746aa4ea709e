#include "agent/rendezvous_user.h"

#include <unistd.h>

#include <algorithm>

namespace trainlet::agent {

std::optional<RendezvousUser> RendezvousUserFor(const step::RunAsRequest& request, uid_t euid,
                                                const step::AccountLookup& accounts) {
  auto identity = step::RankIdentity::Resolve(request, euid, accounts);
  if (!identity.ok() || !identity->has_value() || (*identity)->uid == euid) return std::nullopt;
  return RendezvousUser{(*identity)->uid, (*identity)->gid};
}

std::optional<RendezvousUser> TrainingUser(const v1::LaunchPlan& plan,
                                           const std::string& agent_run_as) {
  for (const auto& w : plan.workers()) {
    if (!w.step().empty()) continue;
    step::RunAsRequest request;
    request.agent_run_as = agent_run_as;
    if (w.has_run_as_user()) request.job_run_as_user = w.run_as_user();
    if (w.has_run_as_group()) request.job_run_as_group = w.run_as_group();
    return RendezvousUserFor(request, ::geteuid());
  }
  return std::nullopt;
}

AdoptedRendezvous AdoptedRendezvousOf(const step::StepLaunch& launch, uid_t euid,
                                      const step::AccountLookup& accounts) {
  AdoptedRendezvous out;
  for (const step::StepRank& r : launch.ranks) {
    if (!r.step.empty()) continue;
    auto token = r.env.find("TRAINLET_RENDEZVOUS_TOKEN");
    if (token == r.env.end() || token->second.empty()) continue;
    if (out.ranks.empty()) {
      out.token = token->second;
      out.user = RendezvousUserFor(r.run_as, euid, accounts);
    }
    out.ranks.push_back(r.rank);
  }
  return out;
}

void MergeAdoptedRendezvous(AdoptedRendezvous& into, const AdoptedRendezvous& more) {
  if (into.token.empty()) {
    into = more;
    return;
  }
  if (more.token != into.token) return;  // not the same attempt's rendezvous: nothing of it
  for (uint32_t r : more.ranks) {
    if (std::find(into.ranks.begin(), into.ranks.end(), r) == into.ranks.end()) {
      into.ranks.push_back(r);
    }
  }
  if (!into.user) into.user = more.user;
}

}  // namespace trainlet::agent
