// Where a job's ranks run on this node: the job's work dir, a container's workingDir, or the job's
// directory under the agent's shared_dir (config key shared_dir; coordinator/working_dir.h decides
// which and writes it into WorkerSpec.cwd).
//
// WorkerSpec.cwd as the agent reads it (launch.proto):
//   ""                                 the job's work dir, <state dir>/work/<job>;
//   "$(TRAINLET_SHARED_WORK_DIR)[/x]"  <shared_dir>/<job>[/x], the same path on every node;
//   a relative path                    under the job's work dir;
//   an absolute path                   as is.
// ResolveWorkerCwd is pure. PrepareWorkerCwds touches the file system: it makes the directories
// trainlet owns (the shared job dir and relative workingDirs, 0700, as the ranks' user, which is
// the agent's) and checks the ones it does not (an absolute workingDir) exist; its error is the
// reason every rank of the plan fails to start. Called from the agent's loop.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "trainlet/v1/launch.pb.h"

namespace trainlet::agent {

// The variable of WorkerSpec.cwd that names the job's shared directory.
inline constexpr const char* kSharedWorkDirVar = "TRAINLET_SHARED_WORK_DIR";
// The node label an agent with a shared_dir reports (value "true"), for placement.
inline constexpr const char* kSharedDirLabel = "trainlet.io/shared-dir";

// A directory of the agent's state dir made private as platform::MakePrivateDirectory does (same
// errors), except that a dir with search (x) and nothing else for group or others (0711) keeps
// it: trainlet-step opens the state dir and <state dir>/work so for ranks of another user
// (agent/step/rank_files.h), and an agent restarted while they run (adopted) must not lock them
// out of their work dir and rendezvous endpoint. Search alone lists no names. *tightened: read or
// write for group or others was taken away.
Status MakeStateDirPrivate(const std::string& dir, bool* tightened);

// <shared_dir>/<job>; "" when `shared_dir` is "" (none configured).
std::string SharedWorkDir(const std::string& shared_dir, const std::string& job);

// The directory a worker whose WorkerSpec.cwd is `cwd` runs in, by the rules above. A cwd naming
// the shared dir on a node that has none is returned unexpanded (PrepareWorkerCwds refuses it).
std::string ResolveWorkerCwd(const std::string& cwd, const std::string& work_dir,
                             const std::string& shared_work_dir);

// Whether any worker of `plan` runs in the job's shared directory (its cwd names it).
bool UsesSharedDir(const v1::LaunchPlan& plan);

// What PrepareWorkerCwds needs to know of the node and job.
struct WorkerCwdContext {
  std::string node;             // for messages
  std::string work_dir;         // the job's, already made
  std::string shared_work_dir;  // SharedWorkDir(); "" when the agent has no shared_dir
};

// Makes or checks each of `cwds` (resolved). Errors:
//   Invalid "node N has no shared directory: the job asks for trainlet.io/working-dir:
//     shared, and this node's agent config sets no shared_dir"
//   Invalid "working directory /x (the container's workingDir): no such directory"
//   Io for a directory that cannot be made.
Status PrepareWorkerCwds(const std::vector<std::string>& cwds, const WorkerCwdContext& ctx);

}  // namespace trainlet::agent
