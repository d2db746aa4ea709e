// JobDataPurge: removes a deleted job's data on this node, its logs (<state dir>/logs/<job>) and
// its work dir (<state dir>/work/<job>, launch_planning.h's JobWorkDir), every attempt's, when
// the coordinator says the job is gone (PurgeJob), so a job applied again under the same name
// starts with none of the old one's output (issue 19, defect 9).
//
// Nothing of a job that still runs here is removed: a purge waits until no worker of the job
// runs (`runs`), so its data is never taken from under it. A launch plan for the job (a new job of
// the same name) cancels a purge still waiting; the old data is then moved aside (below). A job
// name that is not a job key (empty, with a '/', a "..", or anything but lowercase letters, digits,
// '-' and '.') is refused: a message can never name a path outside the state dir.
//
// Incarnations (issue 19, defect 9). Each job incarnation has a UID (JobStatus.uid), sent in its
// launch plans (LaunchPlan.job_uid) and purges (PurgeJob.uid). The first plan of an incarnation
// stamps the job's data with it (<state dir>/logs/<job>/.trainlet-uid). A plan of another UID
// finding data stamped with an older one (a job of the same name deleted while this node missed
// its purge) removes that data before its ranks start, so a re-applied name never sees the old
// job's output or files. When something of the old job still runs here (its step is still
// sweeping up after its ranks, which a `delete` followed at once by an `apply` reaches; or its
// ranks, after a `delete --force`), its logs and work dir are renamed into
// <state dir>/purging/<job>.<old UID>/ instead: its processes keep their open files and working
// directory, which follow the rename, and the new job starts with none of them. Poll removes that
// directory once no worker of the name runs; an agent started again finds it and does the same. A
// purge naming a UID leaves data stamped with another alone (it is a newer job's). Unstamped data
// (written before UIDs, or by an agent before them during an upgrade) is adopted by the next plan's
// UID, never removed by it: it may be the same job's. The directory layout is unchanged
// (logs/<job>/attempt-N, work/<job>): nothing to migrate.
//
// The shared directory (issue 18). A job annotated trainlet.io/working-dir: shared runs in
// <shared_dir>/<job> (working_dirs.h), the same directory on every node. A plan of such a job
// stamps it with its UID in <shared_dir>/.trainlet-uids/<job>, outside the ranks' directory, so a
// stamp exists before any rank writes there. Only the node whose PurgeJob says shared_dir (one per
// deleted job, chosen by the coordinator: coordinator/missed_purges.h) removes it, with its stamp,
// when the stamp is the deleted incarnation's or absent; a newer incarnation's plan has stamped it
// with its own UID by then, and it stays. A plan never removes the shared directory of an older
// incarnation: every node would race to do it. A node without a shared_dir ignores it.
//
// Owned by the agent's loop; no locks.
#pragma once

#include <functional>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>

#include "agent/step/spare_files.h"
#include "common/status.h"
#include "trainlet/v1/launch.pb.h"

namespace trainlet::agent {

// True for a name that can be a job key (coordinator/job_key.h): <name> or <namespace>.<name>,
// lowercase letters, digits, '-' and '.', at most 253, no "..", not starting with '.'.
bool IsJobKey(std::string_view job);

class JobDataPurge {
 public:
  // `runs(job)`: whether any worker of `job` runs on this node now. `shared_dir`: the agent's
  // (config key shared_dir), "" for none.
  JobDataPurge(std::string state_dir, std::string shared_dir,
               std::function<bool(const std::string& job)> runs);
  JobDataPurge(std::string state_dir, std::function<bool(const std::string& job)> runs)
      : JobDataPurge(std::move(state_dir), "", std::move(runs)) {}

  // The coordinator deleted `job`. Its data goes now when nothing of it runs, else at a later
  // Poll. Invalid for a name that is not a job key (nothing is removed); kIo when a directory
  // cannot be removed (what could be is gone).
  // With a `uid`, data stamped with another UID is kept (a newer job of the name owns it).
  // With `shared`, the job's shared directory goes too (see the top of this file).
  Status Request(const std::string& job, const std::string& uid = "", bool shared = false);
  Status Request(const v1::PurgeJob& purge) {
    return Request(purge.job(), purge.uid(), purge.shared_dir());
  }
  // A launch plan for `job` came: a purge still waiting is for an older job of that name, whose
  // data stays rather than the new one's going.
  void Cancel(const std::string& job);
  // A launch plan of `job`'s incarnation `uid` ("" from a coordinator before UIDs) came, before
  // its ranks start: Cancel, then, when the data is stamped with another UID and nothing of the
  // job runs here, removes it (a missed purge); then stamps the data with `uid`. Errors (a
  // directory that cannot be removed or a stamp that cannot be written) are logged here and
  // returned: the plan goes on either way.
  // With `shared` (the plan runs workers in the shared directory), the shared stamp is (re)written
  // with `uid` as well. A new logs/<job> dir is one of `spares`' dirs where it has one.
  Status OnPlan(const std::string& job, const std::string& uid, bool shared = false,
                step::SpareFiles* spares = nullptr);
  // The UID `job`'s data here is stamped with; "" when none.
  std::string StampOf(const std::string& job) const;
  // The UID `job`'s shared directory is stamped with; "" when none (or no shared_dir).
  std::string SharedStampOf(const std::string& job) const;
  // Removes the data of waiting jobs, and the moved-aside data of earlier jobs of a name, once no
  // worker of the name runs. Called from the loop's tick.
  void Poll();
  bool pending() const { return !waiting_.empty() || !graves_.empty(); }
  // Where an earlier incarnation's data goes while something of it still runs (see the top).
  std::string GravePath(const std::string& job, const std::string& uid) const;

 private:
  struct Waiting {
    bool local = true;    // the node's logs and work dir
    bool shared = false;  // the shared directory
  };
  Status Remove(const std::string& job, Waiting what);
  // Renames `job`'s logs and work dir, stamped `stamp`, to GravePath(job, stamp); removed by
  // Poll once no worker of `job` runs.
  Status Bury(const std::string& job, const std::string& stamp);
  Status StampFor(const std::string& job, const std::string& uid,
                  step::SpareFiles* spares);  // OnPlan, unlogged
  Status StampShared(const std::string& job, const std::string& uid);
  std::string StampPath(const std::string& job) const;
  std::string SharedStampPath(const std::string& job) const;

  // Constant after construction.
  const std::string state_dir_;
  const std::function<bool(const std::string&)> runs_;
  const std::string shared_dir_;
  // Owned by the loop.
  // Requested while a worker of theirs still ran: what goes once none runs.
  std::map<std::string, Waiting> waiting_;
  // Moved-aside data (Bury), by job name: removed once no worker of the name runs.
  std::map<std::string, std::set<std::string>> graves_;
};

}  // namespace trainlet::agent
