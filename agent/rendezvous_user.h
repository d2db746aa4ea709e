// RendezvousUser: the user a node's ranks of an attempt run as, when that is not the agent's own
// user, so RendezvousServer gives them an endpoint of their own (docs/rendezvous.md, "Endpoints
// and permissions"): the agent's socket is 0600 and owned by the agent's user, which another
// user's process may not connect to.
//
// Pure functions of their arguments; any thread.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "agent/step/rank_identity.h"
#include "agent/step/step_launch.h"
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

// What a restarted agent gives back to an adopted step's ranks of the node's rendezvous
// (RendezvousServer::RestoreAttempt): what the agent that launched them gave AddAttempt.
struct AdoptedRendezvous {
  std::string token;                   // their TRAINLET_RENDEZVOUS_TOKEN; "" when none
  std::vector<uint32_t> ranks;         // the ranks that take part (see below)
  std::optional<RendezvousUser> user;  // as TrainingUser: the first of them decides
  bool operator==(const AdoptedRendezvous&) const = default;
};

// Read from the step's launch file: the ranks outside any step that were given the token (the
// main replicated job's: an initializer's ranks, and an exec session's command, take no part in
// the fences), and the user the first of them runs as, resolved as trainlet-step resolves it
// (the launch file holds each rank's request, agent_run_as included). Not whoever comes first
// in the file: a rank of another step may run as another user (its own securityContext).
AdoptedRendezvous AdoptedRendezvousOf(const step::StepLaunch& launch, uid_t euid,
                                      const step::AccountLookup& accounts = step::SystemAccounts());
// Another step of the same attempt (a repeated plan started the ranks not yet running under a
// step of their own): its ranks join `into`, whose token and user stay when it has them.
void MergeAdoptedRendezvous(AdoptedRendezvous& into, const AdoptedRendezvous& more);

}  // namespace trainlet::agent
