// What a process may ask of the kernel about its children.
#pragma once

#include <spawn.h>
#include <sys/types.h>

#include <chrono>
#include <string>

#include "common/status.h"

namespace trainlet::platform {

// Makes orphaned descendants come to this process (to be reaped here) instead of to init:
// PR_SET_CHILD_SUBREAPER on Linux. kInternal, naming the call, when the kernel refuses;
// kUnavailable on macOS (and the portable build, which stands in for it), which has no such
// thing: orphans go to launchd/init, which reaps them. Either way the caller only logs it.
Status BecomeChildSubreaper();

// SIGKILLs every child of the caller and reaps it, round after round (a killed child's own
// children come to a subreaper next), until the caller has no child left or `timeout` passes.
// For a subreaper whose own children have all been reaped: what remains came to it as orphans
// (a rank's setsid or double-forked descendants). Returns how many it killed; never blocks past
// `timeout`. Where there is no subreaper (macOS) orphans went to launchd, and this finds none.
int KillOrphanedChildren(std::chrono::milliseconds timeout);

// The pid of a child of the caller that has exited and is not reaped yet, and stays so: a zombie,
// whose pid and process group id cannot be reused while the caller cleans up after it (then it
// reaps it with waitpid). 0 when children run but none has exited; -1 with errno set (ECHILD: no
// children). Never blocks. waitid(WNOWAIT); on macOS, whose waitid also reports stopped and
// continued children, those notifications are consumed and skipped.
pid_t PeekExitedChild();

// Has the spawned process start with no descriptor above stderr open but those the file actions
// name: posix_spawn_file_actions_addclosefrom_np on Linux, POSIX_SPAWN_CLOEXEC_DEFAULT (added
// to *spawn_flags, for posix_spawnattr_setflags) on macOS. 0, or an errno value.
int CloseOtherDescriptorsOnSpawn(posix_spawn_file_actions_t* actions, short* spawn_flags);

// posix_spawn_file_actions_addchdir_np (glibc 2.29, macOS 10.15). 0, or an errno value.
int ChdirOnSpawn(posix_spawn_file_actions_t* actions, const std::string& dir);

}  // namespace trainlet::platform
