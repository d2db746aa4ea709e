// The idle cost of a trainlet agent: resident memory and CPU time of a running local cluster's
// agent (and, for context, its coordinator) over a window in which nothing is submitted.
//
// Reads /proc only; never signals the processes. Threading: one thread.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>

#include "common/status.h"

namespace trainlet::bench {

// One look at a process in /proc.
struct ProcessSample {
  long rss_kb = 0;          // VmRSS
  long hwm_kb = 0;          // VmHWM: peak RSS since start
  long anon_kb = 0;         // RssAnon: heap, stacks; the part the agent itself owns
  long file_kb = 0;         // RssFile: mapped executable and shared libraries
  long pss_kb = 0;          // smaps_rollup Pss: shared pages divided among their users
  long long cpu_ticks = 0;  // utime + stime, clock ticks (includes exited threads)
  long long sched_ns = 0;   // sum of /proc/<pid>/task/*/schedstat run time: ns precision
  int threads = 0;
};

struct ProcessIdle {
  std::string name;  // "agent node-1", "coordinator"
  pid_t pid = 0;
  ProcessSample before;
  ProcessSample after;
};

struct IdleReport {
  double wall_s = 0;
  long clock_ticks_per_s = 100;
  ProcessIdle agent;
  ProcessIdle coordinator;
  // trainlet-rss-floor sampled after the same settle time: the agent's libraries, no trainlet
  // code. Absent when that binary is not built.
  std::optional<ProcessSample> library_floor;
};

// Samples the agent node-1 and the coordinator of the cluster in `cluster_dir` (pid files
// "<pid> <starttime>" under pids/), sleeps `idle` (returns early, with an error, on a stop
// request), and samples again. Waits a few seconds first so start-up work is not counted.
// Errors: a missing pid file, or a process that is gone or was replaced (pid reuse).
// With `floor_binary` (trainlet-rss-floor, "" for none), also starts it, samples it after the
// same settle time and stops it (by pid).
Result<IdleReport> MeasureIdle(const std::string& cluster_dir, std::chrono::seconds idle,
                               const std::string& floor_binary = "");

// Markdown lines with the agent's RSS and CPU against the targets (≤ 8 MiB RSS, < 0.2% of one
// core), each with PASS or MISS, plus the coordinator's numbers for context.
std::string PrintIdleReport(const IdleReport& report);

}  // namespace trainlet::bench
