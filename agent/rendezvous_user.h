// RendezvousUser: the user a node's ranks of an attempt run as, when that is not the agent's own
// user, so RendezvousServer gives them an endpoint of their own (docs/rendezvous.md, "Endpoints
// and permissions"): the agent's socket is 0600 and owned by the agent's user, which another
// user's process may not connect to.
//
// Pure functions of their arguments; any thread.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>

#include "agent/step/rank_identity.h"
#include "trainlet/v1/launch.pb.h"

namespace trainlet::agent {

struct RendezvousUser {
  uid_t uid = 0;
  gid_t gid = 0;
  bool operator==(const RendezvousUser&) const = default;
};

// Who ranks asked to run as `request` run as here, as trainlet-step resolves it for an agent of
// effective uid `euid`; nullopt when that is the agent's own user, or when the request is refused
// (the step then fails those ranks with why, so no endpoint is needed).
std::optional<RendezvousUser> RendezvousUserFor(
    const step::RunAsRequest& request, uid_t euid,
    const step::AccountLookup& accounts = step::SystemAccounts());

// The same for the plan's training ranks (its workers outside any step: the ones that join the
// rendezvous), under the agent's config run_as `agent_run_as`; the first such worker decides,
// since one replicated job (one securityContext) holds them all. nullopt when none.
std::optional<RendezvousUser> TrainingUser(const v1::LaunchPlan& plan,
                                           const std::string& agent_run_as);

}  // namespace trainlet::agent
