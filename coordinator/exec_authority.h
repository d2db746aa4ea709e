// ExecAuthority: who may start remote commands through trainlet-exec, and where.
//
// A runtime whose launcher starts processes on other nodes (its AttemptLayout names an
// exec_launcher_rank, e.g. mpi) gets a fresh CURVE launcher key pair for every attempt: the
// public half is stored in JobStatus.launcher_key, the secret half only here (never stored, never
// in a PlanRequest; after a coordinator restart it is empty). While the attempt is Starting or
// Running, its launcher key is on the exec endpoint's allowlist and may start commands on the
// attempt's nodes; a stale launcher cannot start anything in the next attempt.
//
// It reads each job's status through `find` (the JobController's job map) and the nodes through
// the NodeRegistry; JobController tells it which jobs exist (Track/Forget), AttemptLauncher each
// attempt's keys and secret. Owned by JobController, on the coordinator's loop; no locks.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "coordinator/agent_commands.h"
#include "coordinator/attempt_plan.h"
#include "coordinator/node_registry.h"
#include "trainlet/runtime_plugin.h"
#include "trainlet/v1/operator.pb.h"

namespace trainlet::coordinator {

// Where a trainlet-exec request goes, once its key and host are checked.
struct ExecTarget {
  std::string job;
  uint32_t attempt = 0;
  std::string node;
  std::map<std::string, std::string> env;  // what every process of the job gets on that node
  uint32_t stop_grace_ms = kDefaultStopGraceMs;
  // The job's securityContext.runAsUser / runAsGroup: a remote command (an orted) runs as the
  // same user as the job's ranks (ExecStart.run_as_user).
  std::optional<int64_t> run_as_user, run_as_group;
  // Its securityContext.allowPrivilegeEscalation (ExecStart.allow_privilege_escalation).
  std::optional<bool> allow_privilege_escalation;
  // Its pod's securityContext.fsGroup (ExecStart.fs_group).
  std::optional<int64_t> fs_group;
};

// True when `status`'s current attempt is `attempt` and it may run now: Starting or Running, and
// the job is not being deleted.
bool AttemptActive(const v1::JobStatus& status, uint32_t attempt);

class ExecAuthority {
 public:
  struct Options {
    std::string exec_endpoint;      // advertised exec endpoint, for launchers
    std::string server_public_key;  // the coordinator's CURVE public key
    uint32_t stop_grace_ms = kDefaultStopGraceMs;
  };
  // The status of the job named so, or null when there is none.
  using FindJob = std::function<const v1::JobStatus*(const std::string& job)>;

  // `registry` outlives this; `find` stays callable as long as it.
  ExecAuthority(const NodeRegistry* registry, Options options, FindJob find);

  // The job exists from now on; `env` is what every process of it gets (its plan's env), and
  // `run_as_user` / `run_as_group` who they run as (its securityContext; unset: the agent's
  // run_as), `allow_privilege_escalation` whether they may gain privileges by exec, and
  // `fs_group` the group they share the job's work dir through (its pod's fsGroup).
  void Track(const std::string& job, std::vector<std::pair<std::string, std::string>> env,
             std::optional<int64_t> run_as_user = std::nullopt,
             std::optional<int64_t> run_as_group = std::nullopt,
             std::optional<bool> allow_privilege_escalation = std::nullopt,
             std::optional<int64_t> fs_group = std::nullopt);
  // The job is gone, with its secret.
  void Forget(const std::string& job);
  // `job`'s stored status holds a launcher key (a job reloaded after a restart: its secret is
  // gone, its launcher's key still good). LauncherKeys and ResolveExec look only at jobs given a
  // key here or by SetLauncherSecret, not at every job the controller holds.
  void NoteStoredLauncherKey(const std::string& job);

  // A fresh launcher key pair for a new attempt: its public half, and where the launcher reaches
  // the exec endpoint, into `request`'s exec fields; its secret half returned, for RenderAttempt
  // and SetLauncherSecret only. Errors come from key generation (the attempt fails).
  Result<LauncherSecret> IssueLauncherKeys(PlanRequest& request) const;
  // The secret half of the launcher key of the attempt `job` now runs ("" when it has none).
  void SetLauncherSecret(const std::string& job, std::string secret);
  // What SetLauncherSecret last gave for `job` (empty when nothing, or the job is unknown).
  LauncherSecret SecretOf(const std::string& job) const;

  // AttemptActive() of the job named `job`; false when there is none.
  bool AttemptActive(const std::string& job, uint32_t attempt) const;
  // The launcher key of every attempt that may start remote commands now (Starting or Running):
  // the exec endpoint's allowlist, public key -> job name.
  std::map<std::string, std::string> LauncherKeys() const;
  // Checks that `launcher_key` belongs to a live attempt and `host` (node name, hostname or
  // address) is in its placement. kPermission errors say which, for trainlet-exec to print.
  Result<ExecTarget> ResolveExec(const std::string& launcher_key, const std::string& host) const;

 private:
  struct Launcher {
    std::vector<std::pair<std::string, std::string>> env;
    std::string secret;  // of the current attempt; never stored
    std::optional<int64_t> run_as_user, run_as_group;
    std::optional<bool> allow_privilege_escalation;
    std::optional<int64_t> fs_group;
  };

  const NodeRegistry* registry_;
  Options options_;
  FindJob find_;
  std::map<std::string, Launcher> launchers_;  // by job name: every job the controller holds
  // The jobs whose status may hold a launcher key (an MPI launcher's, issued to one of their
  // attempts): LauncherKeys runs once per loop pass that changed any job, and MPI jobs are few.
  std::set<std::string> keyed_;
};

}  // namespace trainlet::coordinator
