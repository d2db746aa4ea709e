// Process helpers for bench/launch: start a command and wait for it with a deadline, and the
// "floor" contender (N copies of a program started with posix_spawn, then reaped).
//
// Threading: call from one thread only. The helpers reap exactly the children they start (by
// pid), so they do not disturb other children of the benchmark.
// Interruption: InstallStopHandler() makes SIGINT/SIGTERM set a flag; a running wait then kills
// its child (SIGKILL, by pid) and returns an Unavailable error, so callers unwind and clean up.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include "common/status.h"

namespace trainlet::bench {

using Clock = std::chrono::steady_clock;

// Routes SIGINT and SIGTERM to StopRequested() instead of killing the benchmark.
void InstallStopHandler();
bool StopRequested();

struct CommandResult {
  int exit_code = -1;     // exit status, or 128 + signal number
  double elapsed_ms = 0;  // from just before posix_spawn to the moment the child was reaped
  std::string output;     // stdout and stderr together, when captured
};

// Runs argv[0] (searched in PATH when it has no '/'), with stdin from /dev/null and `extra_env`
// ("K=V") added to the environment. Output goes to a temp file read back into `output` when
// `capture` is set, else to /dev/null. A non-zero exit is not an error (see exit_code); failing to
// start, passing `timeout`, or a stop request is. On timeout the child is killed by pid.
Result<CommandResult> RunCommand(const std::vector<std::string>& argv,
                                 const std::vector<std::string>& extra_env,
                                 std::chrono::milliseconds timeout, bool capture);

// The floor: `count` copies of `worker` started back to back with posix_spawn (stdio on
// /dev/null), then each reaped with waitpid. Returns the wall time of the whole loop in ms. Any
// copy that fails to start or exits non-zero is an error naming it.
Result<double> SpawnLoop(const std::string& worker, int count);

// Looks up `name` in PATH; empty when absent.
std::string FindInPath(const std::string& name);

}  // namespace trainlet::bench
