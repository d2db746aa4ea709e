#include "agent/rendezvous_user.h"

#include <unistd.h>

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

}  // namespace trainlet::agent
