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
// AccessPolicy is a value: pure, any thread. AccessPolicyFile holds the one the coordinator
// enforces and re-reads the file when it changes; it is owned by the coordinator's loop.
#pragma once

#include <ctime>
#include <map>
#include <set>
#include <string>
#include <string_view>

#include "common/status.h"

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

class AccessPolicy {
 public:
  enum class Role { kAdmin, kUser };
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

  // False for AllAdmin: nothing is refused.
  bool enforced() const { return enforced_; }
  size_t users() const { return grants_.size(); }

 private:
  bool enforced_ = false;
  std::map<std::string, Grant, std::less<>> grants_;  // by user
};

// The policy file the coordinator enforces, re-read when its modification time changes (as the
// allowlists are, common/zap_authenticator.h), so a grant needs no restart.
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
  timespec mtime_{};  // of the file last read (good or bad); zero while it does not exist
  AccessPolicy policy_;
};

}  // namespace trainlet::coordinator
