// StepUsers: who a step's ranks run as (RankIdentity, resolved once per distinct request), and
// which users hold each job work dir while their ranks run (docs/operations.md, "Ranks of more
// than one user").
//
// A job's ranks on a node share its work dir (TRAINLET_WORK_DIR). Ranks of one user get it as
// their own (GiveJobDirs: the user's, 0700). Ranks of several users at the same time (two
// replicated jobs with different securityContext.runAsUser that run together) share it as
// Kubernetes shares a pod's volumes: through the pods' securityContext.fsGroup, which each rank
// gets as a supplementary group and which the dir belongs to (2770, setgid). The rule:
//  - a rank whose user differs from the user of a rank still running in the same work dir starts
//    only when both ask the same fsGroup; otherwise its start fails naming
//    securityContext.fsGroup (a job of two users at once without fsGroup, or with two of them);
//  - a rank whose work dir no other user's rank holds (one user, or a replicated job of another
//    user that ended before it, dependsOn Complete) takes it over: its own, or its fsGroup's.
// Secrets are per user in any case (rank_files.h): a rank never reads another user's.
//
// A holder is a rank of the step (its index in the launch file's ranks), from Admit until
// Release (it exited, or its start failed). The ranks of the job's other steps on the node (an
// exec session's orted; a replicated job a later plan started, when it waited for another on
// several nodes) count too: each step holds <work_dir>/.trainlet-secrets/uid-<UID>.lock (flock,
// shared; the file the step's, 0600, holding the user's fsGroup or "-") while ranks of that user
// run there, and a step about to admit another user probes every such file (an exclusive lock
// it cannot take is a holder). A step that dies lets go of its holds with its descriptors.
//
// Owned by the step; its single thread.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "agent/step/rank_identity.h"
#include "common/status.h"

namespace trainlet::step {

class StepUsers {
 public:
  StepUsers() = default;
  StepUsers(const StepUsers&) = delete;
  StepUsers& operator=(const StepUsers&) = delete;
  ~StepUsers();  // lets go of its holds

  // Who a rank asked as `request` runs as (RankIdentity::Resolve, as root); nullopt: as the
  // step's own user. Resolved once per distinct request: every rank of a job normally asks the
  // same.
  Result<std::optional<RankIdentity>> IdentityFor(const RunAsRequest& request);

  // Before a rank of `owner` starts with TRAINLET_WORK_DIR `work_dir`: checks the rule above
  // against the ranks that hold it, gives it (GiveJobDirs, with the agent's `state_dir`) and, with
  // an `index`, records that rank as a holder. Without one (a helper that runs as a rank's user,
  // such as the PMIx server) nothing is recorded. Errors (Invalid) name securityContext.fsGroup,
  // the users and the dir; GiveJobDirs' are passed on.
  Status Admit(std::optional<size_t> index, const std::string& work_dir,
               const std::string& state_dir, const RankIdentity& owner);
  // The rank `index` no longer runs (or never started): it holds its work dir no more.
  void Release(size_t index);

  // The users holding `work_dir` now, for tests and messages.
  std::vector<uid_t> HoldersOf(const std::string& work_dir) const;

 private:
  struct Holder {
    std::string work_dir;
    RankIdentity owner;
  };
  struct UserLock {
    std::string work_dir;
    uid_t uid;
    int fd;  // <work_dir>/.trainlet-secrets/uid-<UID>.lock, held shared
  };
  // The rule against the ranks of the other steps on the node (see above); takes this step's
  // hold of the owner's lock file, kept until its last rank in `work_dir` is released.
  Status HoldAcrossSteps(const std::string& work_dir, const RankIdentity& owner);

  std::vector<std::pair<RunAsRequest, std::optional<RankIdentity>>> identities_;
  std::map<size_t, Holder> holders_;
  std::vector<UserLock> locks_;
};

// The rule itself: why `owner` may not join `holders` (the identities of the ranks that hold
// `work_dir` now) in it, or "" when it may.
std::string WorkDirConflict(const std::string& work_dir, const RankIdentity& owner,
                            const std::vector<RankIdentity>& holders);

}  // namespace trainlet::step
