// Linux's process start for ProcessSpawner (process_spawner.cpp): what posix_spawn does
// (clone(CLONE_VM): the child runs on the caller's memory until it has exec'ed or failed), with
// the child binding its own CPUs, and two ways to wait for it.
//
// posix_spawn has no affinity attribute, so binding a rank through it means binding the spawning
// thread, spawning and restoring: two sched_setaffinity calls per rank, and each one that leaves
// the CPU the thread runs on moves the thread there (the kernel's migration thread, an IPI on a
// VM). A step that starts 64 ranks bound round-robin over the CPUs moved itself 64 times, about
// 2 ms of a 64-rank launch on this 2-vCPU machine (bench/README.md, issue 16). Here the child binds
// itself before exec, and the spawning thread never moves.
//
// VforkSpawn suspends the caller until its child has exec'ed (CLONE_VFORK), as posix_spawn does;
// the child's stack is a buffer in the caller's frame. SpawnBatch starts a child and returns at
// once: on a busy machine a new child waits for a CPU behind the ranks already running, and a
// step that waited for each one in turn left the other CPU idle a third of a 64-rank start
// (bench/README.md). Its children run on stacks it owns, and it learns that one has exec'ed from
// the word the kernel clears then (CLONE_CHILD_CLEARTID).
//
// Not async-signal-safe and not for macOS or the portable build (backend.h): those keep
// posix_spawn. Any thread may call VforkSpawn; a SpawnBatch belongs to one thread.
#pragma once

#if defined(__linux__)

#include <sched.h>
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

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
  // SpawnBatch's only (0 from VforkSpawn): the child's start time as /proc/<pid>/stat gives it
  // (clock ticks since boot), without that read. The kernel stamps a new task with the boot-time
  // clock inside clone, so a clock read before and one after that fall in the same tick give it
  // exactly. 0 when they do not (a tick passed meanwhile, about one clone in a few hundred):
  // ProcessStartTime reads it then.
  uint64_t start_ticks = 0;
};

// The child: every signal blocked until just before exec, every disposition default (also those
// the caller ignores), an empty signal mask through exec, stdin /dev/null, stdout and stderr the
// given descriptors, no other descriptor, its own process group (or session), `cwd`, `cpus`.
// Returns once the child has exec'ed or failed.
VforkSpawnResult VforkSpawn(const VforkSpawnPlan& plan);

// Children started one after another, each as VforkSpawn's, without waiting for each one's exec:
// Start returns once the child exists; Finish waits for every child started to have exec'ed or
// failed. At most `max_pending` children are before their exec at once (each has its own 32 KiB
// stack); Start waits for the oldest when all are.
//
// The caller's descriptors may be closed once Start returns (the child has its own table), but
// everything a plan points to (path, argv, envp, cwd, cpus) must stay unchanged until Finish
// returns. The caller's ignored signals are read once, at the first Start: each child sets those
// back to the default (exec does so for caught ones), not all 64 in turn as VforkSpawn's does.
// A signal the caller starts ignoring during the batch stays ignored in the later children. Where
// RawSyscall is libc's (raw_syscall.h), Start waits for each exec as VforkSpawn does.
class SpawnBatch {
 public:
  explicit SpawnBatch(size_t max_pending = 16);
  ~SpawnBatch();  // Finish()es what is pending: no child is left on freed memory
  SpawnBatch(const SpawnBatch&) = delete;
  SpawnBatch& operator=(const SpawnBatch&) = delete;

  // Starts `plan`'s child; its result is Finish's element number (the return value).
  size_t Start(const VforkSpawnPlan& plan);
  // Waits for every child started since the last Finish; their results in Start's order.
  std::vector<VforkSpawnResult> Finish();

 private:
  struct Slot;
  Slot* FreeSlot();      // one whose child has exec'ed or failed (waits for the oldest)
  void Settle(Slot& s);  // waits for s's child and records its result

  std::unique_ptr<Slot[]> slots_;
  size_t max_pending_;
  size_t next_ = 0;       // the slot Start tries first (the oldest in use, once all are)
  int dev_null_ = -1;     // opened at the first Start, each child's stdin (-1: they open it)
  uint64_t ignored_ = 0;  // the caller's ignored signals, bit sig - 1 (read at the first Start)
  std::vector<VforkSpawnResult> results_;
};

}  // namespace trainlet::platform

#endif
