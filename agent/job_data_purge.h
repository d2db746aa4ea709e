// JobDataPurge: removes a deleted job's data on this node, its logs (<state dir>/logs/<job>) and
// its work dir (<state dir>/work/<job>, launch_planning.h's JobWorkDir), every attempt's, when
// the coordinator says the job is gone (PurgeJob), so a job applied again under the same name
// starts with none of the old one's output (issue 19, defect 9).
//
// Nothing of a job that still runs here is removed: a purge waits until no worker of the job
// runs (`runs`), and a launch plan for the job (a new job of the same name) cancels a purge still
// waiting, so its data is never taken from under it. A job name that is not a job key (empty,
// with a '/', a "..", or anything but lowercase letters, digits, '-' and '.') is refused: a
// message can never name a path outside the state dir.
//
// Incarnations (issue 19, defect 9). Each job incarnation has a UID (JobStatus.uid), sent in its
// launch plans (LaunchPlan.job_uid) and purges (PurgeJob.uid). The first plan of an incarnation
// stamps the job's data with it (<state dir>/logs/<job>/.trainlet-uid). A plan of another UID
// finding data stamped with an older one (a job of the same name deleted while this node missed
// its purge) removes that data before its ranks start, so a re-applied name never sees the old
// job's output or files. A purge naming a UID leaves data stamped with another alone (it is a
// newer job's). Unstamped data (written before UIDs, or by an agent before them during an
// upgrade) is adopted by the next plan's UID, never removed by it: it may be the same job's. The
// directory layout is unchanged (logs/<job>/attempt-N, work/<job>): nothing to migrate.
//
// Owned by the agent's loop; no locks.
#pragma once

#include <functional>
#include <map>
#include <set>
#include <string>
#include <string_view>

#include "common/status.h"

namespace trainlet::agent {

// True for a name that can be a job key (coordinator/job_key.h): <name> or <namespace>.<name>,
// lowercase letters, digits, '-' and '.', at most 253, no "..", not starting with '.'.
bool IsJobKey(std::string_view job);

class JobDataPurge {
 public:
  // `runs(job)`: whether any worker of `job` runs on this node now.
  JobDataPurge(std::string state_dir, std::function<bool(const std::string& job)> runs);

  // The coordinator deleted `job`. Its data goes now when nothing of it runs, else at a later
  // Poll. Invalid for a name that is not a job key (nothing is removed); kIo when a directory
  // cannot be removed (what could be is gone).
  // With a `uid`, data stamped with another UID is kept (a newer job of the name owns it).
  Status Request(const std::string& job, const std::string& uid = "");
  // A launch plan for `job` came: a purge still waiting is for an older job of that name, whose
  // data stays rather than the new one's going.
  void Cancel(const std::string& job);
  // A launch plan of `job`'s incarnation `uid` ("" from a coordinator before UIDs) came, before
  // its ranks start: Cancel, then, when the data is stamped with another UID and nothing of the
  // job runs here, removes it (a missed purge); then stamps the data with `uid`. Errors (a
  // directory that cannot be removed or a stamp that cannot be written) are logged here and
  // returned: the plan goes on either way.
  Status OnPlan(const std::string& job, const std::string& uid);
  // The UID `job`'s data here is stamped with; "" when none.
  std::string StampOf(const std::string& job) const;
  // Removes the data of waiting jobs that no longer run. Called from the loop's tick.
  void Poll();
  bool pending() const { return !waiting_.empty(); }

 private:
  Status Remove(const std::string& job);
  Status StampFor(const std::string& job, const std::string& uid);  // OnPlan, unlogged
  std::string StampPath(const std::string& job) const;

  // Constant after construction.
  const std::string state_dir_;
  const std::function<bool(const std::string&)> runs_;
  // Owned by the loop.
  // Requested while a worker of theirs still ran: job -> the UID the purge named ("": any).
  std::map<std::string, std::string> waiting_;
};

}  // namespace trainlet::agent
