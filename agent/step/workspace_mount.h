// How a job's per-node workspace reaches the ranks of a step (docs/runtimes.md, "Initializers and
// the workspace"). Kubeflow's runtimes read /workspace/dataset and /workspace/model; the agent
// gives every rank TRAINLET_WORKSPACE (the job's real workspace dir) and TRAINLET_DATASET_DIR /
// TRAINLET_MODEL_DIR under it (agent/launch_planning.h). Two modes:
//
//  - private mount namespace (Linux, as root): the step unshares its mount namespace, makes every
//    mount in it private (nothing propagates back to the host), and binds the workspace on
//    /workspace, which the ranks it starts then inherit. /workspace is created on the host only
//    when it is missing and the filesystem lets it be; on the host it stays an empty dir. The
//    ranks' TRAINLET_DATASET_DIR and TRAINLET_MODEL_DIR become /workspace/dataset and
//    /workspace/model. Described as "/workspace (private mount namespace)".
//  - env only (not root, macOS, or any of the above failing): the env carries the real paths.
//    Described as "TRAINLET_WORKSPACE=<path>".
//
// The step writes the description to <step dir>/workspace before it starts its ranks; the agent
// reads it back (ReadWorkspaceNote) for the STARTED events (WorkerEvent.workspace).
//
// Plain libc; call from trainlet-step's single thread only (unshare of the mount namespace
// fails in a process with threads).
#pragma once

#include <string>

#include "agent/step/step_launch.h"
#include "common/status.h"

namespace trainlet::step {

class SpareFiles;

inline constexpr char kWorkspaceMountPoint[] = "/workspace";
inline constexpr char kWorkspaceNoteFile[] = "workspace";  // in the step dir

// The workspace every rank of `launch` names (TRAINLET_WORKSPACE); "" when none does (an agent
// before workspaces), or when ranks name different ones (never for one job attempt).
std::string LaunchWorkspace(const StepLaunch& launch);

// Pure: the ranks' dataset and model dirs pointed at the mount point, for the ranks whose
// TRAINLET_WORKSPACE is `workspace`.
void PointRanksAtMount(StepLaunch& launch, const std::string& workspace);

// The descriptions above.
std::string MountedDescription();
std::string EnvDescription(const std::string& workspace);

// Linux as root: this process into a private mount namespace with `workspace` bound on
// `mount_point`. Errors name the step that failed (Unavailable when not root or not Linux).
Status EnterWorkspaceNamespace(const std::string& workspace,
                               const std::string& mount_point = kWorkspaceMountPoint);

// What trainlet-step calls once, before starting its ranks: picks the mode, changes the ranks'
// env for it, and writes the note into `step_dir` (its temporary file a spare of `spares` where
// one waits: no inode allocated before the first rank). Returns the description ("" when the
// ranks have no workspace). Why the namespace was not used goes to `why_not` (for step.log).
std::string ApplyWorkspace(const std::string& step_dir, StepLaunch& launch, std::string* why_not,
                           SpareFiles* spares = nullptr);

// The note of a step dir; "" when it has none (a step before workspaces, or no workspace).
std::string ReadWorkspaceNote(const std::string& step_dir);

}  // namespace trainlet::step
