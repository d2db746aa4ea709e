// Finding and killing what a worker left behind outside its process group.
//
// A rank's helpers may leave its process group: OpenMPI's orted puts every rank it starts in a
// group of its own, so signalling orted's group misses the ranks. Every process a job starts on
// this node carries the job's TRAINLET_* variables in its environment (inherited through orted
// and its ranks), so a sweep of every process's environment (/proc on Linux, sysctl
// KERN_PROCARGS2 on macOS: platform/process_info.h) by those variables finds them all. Slurm's
// proctrack/linuxproc tracks by parent pids instead; the environment survives re-parenting.
#pragma once

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

namespace trainlet::agent {

// PIDs of live processes (not zombies, not this process) whose environment holds every
// NAME=value in `tags`. Processes that vanish or cannot be read during the scan are skipped.
std::vector<pid_t> FindTaggedProcesses(const std::map<std::string, std::string>& tags);

// SIGKILLs every process FindTaggedProcesses finds; returns how many were signalled.
size_t KillTaggedProcesses(const std::map<std::string, std::string>& tags);

}  // namespace trainlet::agent
