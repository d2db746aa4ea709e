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
// Owned by the agent's loop; no locks.
#pragma once

#include <functional>
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
  Status Request(const std::string& job);
  // A launch plan for `job` came: a purge still waiting is for an older job of that name, whose
  // data stays rather than the new one's going.
  void Cancel(const std::string& job);
  // Removes the data of waiting jobs that no longer run. Called from the loop's tick.
  void Poll();
  bool pending() const { return !waiting_.empty(); }

 private:
  Status Remove(const std::string& job);

  // Constant after construction.
  const std::string state_dir_;
  const std::function<bool(const std::string&)> runs_;
  // Owned by the loop.
  std::set<std::string> waiting_;  // requested while a worker of theirs still ran
};

}  // namespace trainlet::agent
