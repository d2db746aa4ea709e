// Facts about processes, read without being their parent: /proc on Linux (the portable build
// included), proc_pidinfo(3) and sysctl(3) on macOS.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace trainlet::platform {

// When `pid` started, in the platform's unit: clock ticks since boot on Linux (field 22 of
// /proc/<pid>/stat), microseconds since the epoch on macOS (pbi_start_tvsec/usec). Only ever
// compared with another value from this function on the same machine: with the pid it names one
// process, since a later process given the same pid has a later start. nullopt when the process
// is gone. A zombie keeps its start time: callers that need "alive" use SameProcessAlive.
std::optional<uint64_t> ProcessStartTime(pid_t pid);
// True for a process that has exited and not been reaped; false when it runs or is gone.
bool IsZombie(pid_t pid);
// The process that started at `start_time` still runs under `pid` (and is not a zombie).
bool SameProcessAlive(pid_t pid, uint64_t start_time);

// The parent of `pid` (after any re-parenting: a subreaper or init); nullopt when it is gone.
std::optional<pid_t> ParentOf(pid_t pid);

// This program's own executable, absolute; "" when it cannot be told.
std::string ExecutablePath();
// Every process id on the machine (of every user; some may be gone by the time they are used).
std::vector<pid_t> ListProcesses();
// The "K=V" environment `pid` started with; nullopt when it cannot be read (gone, another
// user's).
std::optional<std::vector<std::string>> ProcessEnvironment(pid_t pid);
// The same environment as one block of NUL-terminated "K=V" entries, read into `block` (its
// storage reused from call to call: a sweep of every process allocates nothing per process);
// false when it cannot be read.
bool ReadProcessEnvironment(pid_t pid, std::string* block);

}  // namespace trainlet::platform
