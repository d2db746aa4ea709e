// ReplicatedJobUsers: which replicated jobs of a runtime run as which user, where the spec says
// so, and whether two users would share the job's work dir at the same time without a common
// securityContext.fsGroup (docs/operations.md, "Ranks of more than one user").
//
// trainlet runs every replicated job of an attempt on EVERY node of the gang (attempt_steps.h: a
// step runs its replicas on each placed node; the main one runs the plugin's ranks there, an mpi
// launcher on node rank 0 beside that node's ranks), and a job's ranks on a node share its work
// dir. So two replicated jobs that run at the same time share a work dir on every node of every
// placement: no placement keeps their users apart, and the gang planner has nothing to choose.
// When both name their user explicitly (securityContext.runAsUser, which overrides the agent's
// run_as on every node) and the users differ without one fsGroup in both pods, the second user's
// ranks could never start (agent/step/step_users.h): that is certain from the spec alone, so the
// job is refused when it is applied, naming the field, instead of failing an attempt after it was
// placed and started. Where a replicated job names no runAsUser its user is the node's agent's
// run_as (or the agent's own user), which only the node knows: trainlet-step's StepUsers::Admit
// stays the check for those, when the rank starts.
//
// Who is "the main one": with a `launcher` (the mpi runtimes), mpirun, every orted it starts and
// every rank run as the launcher container's user (trainjob::Resolve's base container), so
// `launcher` and `node` are one replicated job here; the `node` container's runAsUser,
// runAsGroup and fsGroup are not used, and UserWarnings says so when they differ.
//
// At the same time: Y runs after X has ended when Y waits (dependsOn, any status, followed
// transitively) for some W that waits for X with status Complete, directly or through a chain of
// Complete only (W starts after X ended; a Ready link says only that W started after X started).
// Everything else may overlap. The main one's dependsOn is `node`'s (what trainlet enforces).
//
// Pure functions of their arguments; any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/trainjob/trainjob_model.h"

namespace trainlet::coordinator {

// One replicated job as far as users go.
struct ReplicatedJobUser {
  std::string name;                    // "launcher" (with a launcher) or "node" for the main one
  size_t index = 0;                    // its position in spec.template.spec.replicatedJobs
  std::optional<int64_t> run_as_user;  // explicit: its container's (or pod's) runAsUser
  std::optional<int64_t> fs_group;     // its pod's securityContext.fsGroup
  std::vector<trainjob::JobDependency> depends_on;  // by replicated job name, as enforced
};

// The replicated jobs of `runtime` that run processes, in runtime order: the main one once (see
// above), then every step. A job without a container is left out.
std::vector<ReplicatedJobUser> ReplicatedJobUsersOf(const trainjob::TrainingRuntime& runtime);

// Whether replicated jobs `a` and `b` of `users` (names) may run at the same time on a node.
bool RunTogether(const std::vector<ReplicatedJobUser>& users, const std::string& a,
                 const std::string& b);

// Why no TrainJob can run on `runtime`, or "": two of its replicated jobs that run together have
// different explicit runAsUser and not the same fsGroup. The message starts with the runtime and
// the path of the pod's securityContext.fsGroup to fix, and names both replicated jobs and users.
std::string ReplicatedJobUsersConflict(const trainjob::TrainingRuntime& runtime);

// Ok, or Invalid with ReplicatedJobUsersConflict's message after "TrainJob/<name>: ".
Status CheckReplicatedJobUsers(const trainjob::TrainJob& job,
                               const trainjob::TrainingRuntime& runtime);

// Warnings for `job` on `runtime`: with a launcher, a `node` container securityContext
// (runAsUser, runAsGroup, fsGroup) that differs from the launcher's is not used.
std::vector<std::string> UserWarnings(const trainjob::TrainJob& job,
                                      const trainjob::TrainingRuntime& runtime);

}  // namespace trainlet::coordinator
