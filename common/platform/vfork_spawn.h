// Linux's process start for ProcessSpawner (process_spawner.cpp): what posix_spawn does
// (clone(CLONE_VM | CLONE_VFORK): the parent waits, in the same address space, until the child
// has exec'ed or failed), with the child binding its own CPUs.
//
// posix_spawn has no affinity attribute, so binding a rank through it means binding the spawning
// thread, spawning and restoring: two sched_setaffinity calls per rank, and each one that leaves
// the CPU the thread runs on moves the thread there (the kernel's migration thread, an IPI on a
// VM). A step that starts 64 ranks bound round-robin over the CPUs moved itself 64 times, about
// 2 ms of a 64-rank launch on this 2-vCPU machine (bench/README.md, issue 16). Here the child binds
// itself before exec, and the spawning thread never moves. The child's stack is a buffer in the
// caller's frame (the caller is suspended until the exec), not a fresh mapping per spawn.
//
// Not async-signal-safe and not for macOS or the portable build (backend.h): those keep
// posix_spawn. Any thread may call it; each call is independent.
#pragma once

#if defined(__linux__)

#include <sched.h>
#include <sys/types.h>

namespace trainlet::platform {

struct VforkSpawnPlan {
  const char* path = nullptr;  // absolute or relative to the caller's cwd (not searched)
  char* const* argv = nullptr;
  char* const* envp = nullptr;
  int stdout_fd = -1;  // dup2'd onto 1 and 2 (both required); stdin is /dev/null
  int stderr_fd = -1;
  const char* cwd = nullptr;        // nullptr: the caller's
  const cpu_set_t* cpus = nullptr;  // nullptr: the caller's affinity
  bool new_session = false;         // setsid; else a new process group (setpgid(0, 0))
};

// Which step of the child's set-up failed.
enum class VforkSpawnStage { kNone, kSetup, kAffinity, kChdir, kExec };

struct VforkSpawnResult {
  pid_t pid = -1;  // > 0 only when the program was exec'ed
  int err = 0;     // errno of the failed step (the failed child has been reaped)
  VforkSpawnStage stage = VforkSpawnStage::kNone;
};

// The child: every signal blocked until just before exec, every disposition default (also those
// the caller ignores), an empty signal mask through exec, stdin /dev/null, stdout and stderr the
// given descriptors, no other descriptor, its own process group (or session), `cwd`, `cpus`.
VforkSpawnResult VforkSpawn(const VforkSpawnPlan& plan);

}  // namespace trainlet::platform

#endif
