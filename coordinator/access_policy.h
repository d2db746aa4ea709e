// AccessPolicy: who may do what on the operator endpoint.
//
// A user is the name an operator key has in the operator allowlist ("<z85> alice", the name
// deploy/kubernetes/make-keys gives operators/alice.key). The policy file, next to the allowlists
// (<dir of --operator-allowlist>/policy.yaml), grants each user one role:
//
//   users:
//     alice: {role: admin}                      # everything
//     bob:   {role: user, namespaces: [team-a]}  # jobs of team-a; status of every job
//
// - admin: every request.
// - user: apply (create), suspend, resume and delete TrainJobs, and read their logs, only in the
//   namespaces listed; get, describe and wait on every job. Nothing about nodes (cordon, drain),
//   runtimes or queues: the kinds only admins may apply are in one table (AdminOnlyKind).
// - a user the file does not name: nothing at all.
// Without a policy file (AllAdmin) every operator key is admin, as before policies existed, so a
// single user notices nothing.
//
// Check answers PermissionDenied (ErrorCode::kPermission) with a message naming the user, the verb
// and the namespace: `user "bob" may not delete trainjobs in namespace "team-b"`.
//
// Run-as rules: which uids and gids a job's ranks may run as (its containers' securityContext
// runAsUser / runAsGroup, which override the agent's run_as on every node), per namespace:
//
//   namespaces:
//     team-a:
//       runAsUsers: ["1000-1999", 65534]   # single ids and inclusive ranges
//       runAsGroups: ["1000-1999"]
//
// A user's job may ask only ids its namespace's lists hold. With no rule for the namespace (or no
// list for the kind of id) it may ask none: its ranks run as the agent's run_as (or the agent's
// own user), the safe default. Admins may ask any. CheckRunAs refuses with the path of the field,
// the id, the namespace and the user: `<path>.securityContext.runAsUser: uid 0 is not allowed in
// namespace "team-a" for user "bob" (allowed: 1000-1999, 65534)`. The agent still refuses uid 0
// on a node whose run_as is another user, whatever the policy says (agent/step/rank_identity.h).
//
// AccessPolicy is a value: pure, any thread. AccessPolicyFile holds the one the coordinator
// enforces and re-reads the file when it changes; it is owned by the coordinator's loop.
#pragma once

#include <ctime>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/file_version.h"
#include "common/status.h"

namespace YAML {
class Node;
}

namespace trainlet::coordinator {

// What an operator request does, as the policy sees it.
enum class Verb {
  kApply,    // apply a TrainJob (create it, or change it by re-applying)
  kSuspend,  // suspend a TrainJob
  kResume,   // resume a TrainJob
  kDelete,   // delete a TrainJob
  kGet,      // get, describe, wait: read a job's status
  kLogs,     // read a rank's log
  kCordon,   // cordon or uncordon a node
  kDrain,    // drain a node (with --force, fail the attempts running there)
  kManage,   // apply a kind only admins may apply (runtimes, queue objects): AdminOnlyKind
};

// "delete trainjobs", "read logs of trainjobs", "drain nodes", as refusals say them.
std::string_view VerbPhrase(Verb verb);

// Whether applying a document of `kind` needs the admin role. The one table of such kinds: the
// runtimes (ClusterTrainingRuntime, TrainingRuntime) and Kueue's queue objects (ResourceFlavor,
// ClusterQueue, LocalQueue, WorkloadPriorityClass). Every other kind (TrainJob, the Training
// Operator's jobs) is a job: Verb::kApply in its namespace.
bool AdminOnlyKind(std::string_view kind);

// An inclusive range of ids a run-as rule allows ("1000-1999"; a single id is first == last).
struct IdRange {
  int64_t first = 0, last = 0;
  bool operator==(const IdRange&) const = default;
};

// One uid or gid a job asks its ranks to run as, and where it asks it.
struct RunAsAsk {
  // The field, for refusals: "ClusterTrainingRuntime/torch-distributed: spec.template.spec.
  // replicatedJobs[node]...containers[node].securityContext.runAsUser".
  std::string path;
  bool group = false;  // runAsGroup; else runAsUser
  int64_t id = 0;
};

class AccessPolicy {
 public:
  enum class Role { kAdmin, kUser };
  // A namespace's run-as rule: the uids and gids its jobs may ask (empty: none).
  struct RunAsRule {
    std::vector<IdRange> users, groups;
  };
  struct Grant {
    Role role = Role::kUser;
    std::set<std::string> namespaces;  // kUser only
  };

  // No policy file: every user is admin.
  static AccessPolicy AllAdmin() { return AccessPolicy(); }
  // Parses a policy file's text. Invalid naming `file`, the line and the field, e.g.
  // "policy.yaml: line 3, column 10: users.bob.role: must be admin or user, got \"root\"".
  static Result<AccessPolicy> Parse(std::string_view yaml, const std::string& file);

  // Ok, or PermissionDenied naming the user, the verb and the namespace ("" for requests that
  // name none: cordon, drain).
  Status Check(std::string_view user, Verb verb, std::string_view ns) const;
  // Apply of one document of `kind` in `ns`: kManage for an AdminOnlyKind (the refusal names the
  // kind), kApply otherwise.
  Status CheckApply(std::string_view user, std::string_view kind, std::string_view ns) const;

  // Ok when `user` may run a job of namespace `ns` as every id of `asks` (the run-as rules at the
  // top of this file); else PermissionDenied naming the first field refused, the id, the
  // namespace and the user.
  Status CheckRunAs(std::string_view user, std::string_view ns,
                    const std::vector<RunAsAsk>& asks) const;

  // False for AllAdmin: nothing is refused.
  bool enforced() const { return enforced_; }
  size_t users() const { return grants_.size(); }

 private:
  // The file's namespaces: map into run_as_rules_. Errors as Parse's.
  Status ParseNamespaces(const YAML::Node& namespaces, const std::string& file);

  bool enforced_ = false;
  std::map<std::string, Grant, std::less<>> grants_;            // by user
  std::map<std::string, RunAsRule, std::less<>> run_as_rules_;  // by namespace
};

// The policy file the coordinator enforces, re-read when it changes (common/file_version.h, as
// the allowlists are, common/zap_authenticator.h), so a grant needs no restart.
class AccessPolicyFile {
 public:
  // Reads `path`. A missing file is AllAdmin (and is read once it appears); a file that does not
  // parse is the error of AccessPolicy::Parse, or kIo when it cannot be read.
  static Result<AccessPolicyFile> Open(const std::string& path);
  // The policy now, re-read first when the file changed. A changed file that does not parse (or
  // a file removed) keeps the last good policy, and the reason is logged once per change.
  const AccessPolicy& Current();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  FileVersion version_;  // of the file last read (good or bad); unknown while it does not exist
  AccessPolicy policy_;
};

}  // namespace trainlet::coordinator
