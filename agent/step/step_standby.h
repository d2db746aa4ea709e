// trainlet-step --standby MODE: a step started before its launch, by the agent
// (agent/standby_step.h), so that the slowest part of a step's start is paid while no launch
// waits for it.
//
// Why: the ranks must start inside their cgroup, so a step moves itself into it before it spawns
// them. A move between cgroups takes the kernel's cgroup_threadgroup_rwsem for writing, which
// waits for an RCU grace period: 6-16 ms measured here (bench/README.md), against 18 ms to spawn
// all of 64 ranks. A standby makes the cgroup ("step-<its pid>", as any step's) and moves into it
// at once, then waits for its step directory; the launch that takes it spawns its first rank
// without waiting for the move.
//
// The hand-over: descriptor 1 is one end of a socket pair whose other end the agent holds. The
// agent writes the step directory's absolute path and '\n'; the standby then sends its stderr to
// <dir>/step.log and runs RunStep(dir) in the cgroup it entered, answering "ready\n" on the same
// socket as any step answers on its stdout pipe. EOF or an error before a whole line (the agent
// stopped, or dropped its standby) ends the standby: it leaves and removes its cgroup, exit 0.
// A standby that cannot make or enter its cgroup still waits, and its step makes its own.
#pragma once

#include <optional>
#include <string>

namespace trainlet::step {

// The whole life of a standby step; `mode` is StepLaunch::cgroup's ("auto", "v2", "v1", "none").
// Returns the process exit code. Call only from trainlet-step's main (as RunStep).
int RunStandbyStep(const std::string& mode);

// One '\n'-terminated line read from `fd` (blocking), without the '\n'; nullopt at EOF, on an
// error, or past 4096 bytes without one.
std::optional<std::string> ReadHandOver(int fd);

}  // namespace trainlet::step
