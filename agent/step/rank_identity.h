// Who a rank runs as (docs/config.md, `run_as`; docs/operations.md, "Security model").
//
// The agent's `run_as` ("user", "uid" or "user:group", names or numbers) is the default for every
// rank of the node; a job's container securityContext.runAsUser / runAsGroup (WorkerSpec
// run_as_user / run_as_group) overrides it for that job's ranks. trainlet-step resolves it
// against the node's accounts (RankIdentity::Resolve) while it is still root, does its root-only
// setup (cgroup, private /workspace mount, the rank's dirs and secret files), and then starts
// each rank through `trainlet-step --as UID:GID:GROUPS ENV_FILE -- argv...` (RunAsArgv), which
// drops privileges with DropPrivileges (setgroups, setgid, setuid, in that order) and execs the
// rank.
//
// That helper starts as root, so it must not start with the rank's env: LD_PRELOAD,
// LD_LIBRARY_PATH, GCONV_PATH and the like, which a job sets, would run the job's code as root
// in the dynamic loader. It is spawned with an empty env, and reads the rank's from ENV_FILE
// (WriteEnvFile: 0600 in the step's 0700 dir, removed as soon as it is read), to exec the rank
// with it once it is that user.
//
// Errors name the field at fault ("run_as: user 'ghost' does not exist on this node",
// "securityContext.runAsUser: ..."): the rank's start fails with it, and so does the attempt.
//
// Plain libc; Resolve reads the account database through an AccountLookup so tests need neither
// root nor particular accounts. Safe from any thread (the lookups are the caller's).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace trainlet::step {

// What a rank's identity comes from, before it is resolved: the agent's default and the job's
// overrides, each as written.
struct RunAsRequest {
  std::string agent_run_as;                 // the agent config's run_as; "" when unset
  std::optional<int64_t> job_run_as_user;   // securityContext.runAsUser
  std::optional<int64_t> job_run_as_group;  // securityContext.runAsGroup
  // The pod's securityContext.fsGroup: a supplementary group of the rank, and the group the job's
  // dirs are shared through (rank_files.h). Not who the rank is: empty() ignores it, and a rank
  // that runs as the step's own user gets nothing of it.
  std::optional<int64_t> fs_group;
  // securityContext.allowPrivilegeEscalation. Not part of who the rank is (Resolve and empty()
  // ignore it): it decides whether the rank gets no_new_privs (NoNewPrivsFor).
  std::optional<bool> allow_privilege_escalation;
  bool operator==(const RunAsRequest&) const = default;
  bool empty() const { return agent_run_as.empty() && !job_run_as_user && !job_run_as_group; }
};

// An account of the node, as getpwnam/getpwuid give it.
struct Account {
  std::string name;
  uid_t uid = 0;
  gid_t gid = 0;  // its primary group
};

// The node's account database; the real one is SystemAccounts().
struct AccountLookup {
  std::function<std::optional<Account>(const std::string&)> by_name;
  std::function<std::optional<Account>(uid_t)> by_uid;
  std::function<std::optional<gid_t>(const std::string&)> group_by_name;
  // The supplementary groups of an account (getgrouplist), its primary group included.
  std::function<std::vector<gid_t>(const Account&)> groups_of;
};
const AccountLookup& SystemAccounts();

struct RankIdentity {
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;  // supplementary groups, set with setgroups
  std::string name;           // the account's name, for messages ("" when it has none)
  // The field it came from ("run_as", "securityContext.runAsUser"), for messages.
  std::string field;
  // securityContext.fsGroup (RunAsRequest), also in `groups`; nullopt when the pod sets none.
  std::optional<gid_t> fs_group;
  bool operator==(const RankIdentity&) const = default;

  // nullopt: the ranks run as the step's own user (nothing asked, or what was asked is who the
  // step already is). A request's fs_group is added to `groups` (after the others, once) and set
  // in `fs_group`. Errors (Invalid, naming the field): a malformed run_as, a user or uid that
  // does not exist on this node, a negative id (securityContext.fsGroup too), root asked by a job
  // on a node whose run_as is another user, or a step that is not root (`euid`) asked to be someone
  // else.
  static Result<std::optional<RankIdentity>> Resolve(const RunAsRequest& request, uid_t euid,
                                                     const AccountLookup& accounts);

  // "UID:GID:G1,G2" for `trainlet-step --as`, and back. Decode errors are Invalid.
  std::string Encode() const;
  // For people (describe): "nobody (uid 65534, gid 65534)", "uid 4000, gid 4000" without a name.
  std::string Text() const;
  // Text() of what `request` resolves to here, as the step will resolve it: "" when the rank runs
  // as the caller's own user (nothing to switch) or the request is refused (its start fails with
  // why).
  static std::string TextOf(const RunAsRequest& request);
  static Result<RankIdentity> Decode(const std::string& text);
};

// `self` (trainlet-step's own path) --as <identity> <env_file> -- argv...
std::vector<std::string> RunAsArgv(const std::string& self, const RankIdentity& identity,
                                   const std::string& env_file,
                                   const std::vector<std::string>& argv);

// `envp` ("K=V") NUL-separated into a new file `path` (0600; an existing one is an error).
// Errors (Io) name the path.
Status WriteEnvFile(const std::string& path, const std::vector<std::string>& envp);
// Reads and removes it. Errors name the path.
Result<std::vector<std::string>> TakeEnvFile(const std::string& path);

// setgroups, setgid, setuid; then checks that root cannot be taken back (setuid(0) fails) and
// that the ids are the ones asked, and, for a user other than root, sets no_new_privs
// (PR_SET_NO_NEW_PRIVS), so that no setuid binary or file capability lifts the rank or its
// children back. An error means the rank must not be started.
Status DropPrivileges(const RankIdentity& identity);

// Whether a rank asked as `request` may gain privileges by exec (a setuid binary, file
// capabilities): only when its container sets securityContext.allowPrivilegeEscalation: true,
// and even then a rank of a user other than root does not (DropPrivileges). Kubernetes sets
// no_new_privs only for `false`; trainlet sets it by default, root ranks included, because its
// ranks run on the node itself, with no container around them (docs/operations.md, "Security
// model").
bool NoNewPrivsFor(const RunAsRequest& request);

// no_new_privs (PR_SET_NO_NEW_PRIVS) for the calling thread and everything it starts from now on,
// when NoNewPrivsFor holds for every one of `ranks`: a step calls it once, before it spawns
// anything or starts a thread, so all of its ranks (and `trainlet-step --as`, which needs no exec
// privilege to drop to a user) run with it. It cannot be undone: a step with one rank that may
// escalate leaves it unset for all (that rank's root siblings included; a rank of another user
// still gets it from DropPrivileges). True when it was set. Errors (Permission) mean the kernel
// refused it: the step must not start its ranks.
Result<bool> EnterNoNewPrivs(const std::vector<RunAsRequest>& ranks);

// The body of `trainlet-step --as ID ENV_FILE -- argv...`: takes the env file, drops privileges
// and execs argv with that env (looked up in its PATH, as execvp does). Returns only on failure,
// with the exit code (127 when argv cannot be executed, 126 when privileges could not be dropped),
// after writing why to stderr (the rank's log).
int RunAs(int argc, char** argv);

}  // namespace trainlet::step
