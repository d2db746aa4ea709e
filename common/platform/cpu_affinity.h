// CPU affinity of the calling thread: where posix_spawn starts workers (macOS, the portable
// build), which has no affinity attribute, the spawner binds itself, spawns, and restores. On
// Linux the child binds itself (vfork_spawn.h); the agent reads and checks CPUs with these.
//
// Linux: sched_getaffinity/sched_setaffinity. macOS has no user API that pins a thread to CPUs
// (Apple Silicon exposes none; thread_policy_set's affinity tags are only hints, and absent on
// arm64): there CpuAffinitySupported() is false and binding is skipped. The caller logs that once.
#pragma once

#include <vector>

namespace trainlet::platform {

bool CpuAffinitySupported();

// The calling thread's CPU set, to restore later. Opaque outside this file.
struct SavedAffinity {
  std::vector<unsigned char> bytes;
};

// Binds the calling thread to `cpus` (CPU numbers the kernel uses), saving the old set in
// *saved. 0, or an errno value (EINVAL: none of `cpus` is usable). Does nothing and returns 0
// where CpuAffinitySupported() is false, and where the thread is bound to exactly `cpus` already
// (then RestoreThisThread does nothing either).
int BindThisThread(const std::vector<unsigned>& cpus, SavedAffinity* saved);
void RestoreThisThread(const SavedAffinity& saved);
// The CPUs the calling thread may run on; empty where that cannot be told.
std::vector<unsigned> ThisThreadCpus();

}  // namespace trainlet::platform
