// The seam over process creation and signalling, in the spirit of leveldb's Env (and part of
// platform::Env, env.h): the agent's WorkerSupervisor does all of its OS process work through a
// ProcessSpawner, so tests can swap in one that fails a spawn or records the signals sent
// (tests/common/fake_env.h), without root and without real failures. Plain libc, like the rest
// of trainlet_platform: trainlet-step spawns its ranks with it.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"

namespace trainlet::platform {

class ProcessSpawner {
 public:
  virtual ~ProcessSpawner() = default;

  struct Request {
    std::vector<std::string> argv;  // argv[0] is the program; must not be empty
    std::vector<std::string> envp;  // "K=V", the child's complete environment
    std::string cwd;                // working directory of the child; empty: the agent's own
    std::string log_path;           // stdout+stderr, appended; empty: /dev/null
    // When not empty, stderr is appended here instead, and log_path takes stdout only (an exec
    // session, whose two streams are relayed apart). Created like log_path.
    std::string stderr_path;
    // When >= 0, the child's stdout / stderr is this descriptor (a pipe the caller reads, or a
    // log the caller opened with OpenWorkerLog) instead of the log file; with both set, log_path
    // and stderr_path are not opened. Still owned by the caller, who closes its copy after Spawn.
    int stdout_fd = -1;
    int stderr_fd = -1;
    // When not empty, the child's CPU affinity, set before its exec: on Linux the child binds
    // itself (vfork_spawn.h); elsewhere the spawning thread binds itself to these CPUs, spawns
    // (the child inherits the mask through exec) and restores its own mask.
    std::vector<unsigned> cpus;
    // Leads a new session (setsid) instead of only a new process group: a step process, which
    // must not get the terminal's or the agent's session signals.
    bool new_session = false;
  };

  // Starts one process and returns its pid. The child:
  //  - leads its own process group (pgid == pid), so the whole tree can be signalled at once
  //    (and its own session too when `new_session`);
  //  - has stdin from /dev/null and stdout+stderr appended to log_path (created 0600, parent dirs
  //    created as needed);
  //  - has an empty signal mask and default dispositions, since the agent blocks SIGCHLD, SIGTERM
  //    and SIGINT and a child would inherit that;
  //  - inherits no descriptor of the agent other than 0, 1 and 2;
  //  - runs in `cwd`; a relative argv[0] containing '/' is resolved from there.
  // argv[0] without '/' is looked up in the PATH found in `envp` (not the agent's PATH), relative
  // PATH entries taken from `cwd`. Never forks the agent: vfork-like, on Linux a
  // clone(CLONE_VM | CLONE_VFORK) of its own (vfork_spawn.h), elsewhere posix_spawn.
  // Errors (values, never aborts): Invalid for an empty argv or CPUs the kernel refuses; NotFound
  // when argv[0] or cwd does not exist; Io when the log file cannot be created; Permission when
  // exec is refused; Internal otherwise. The message names argv[0] (or the path) and the errno
  // text.
  virtual Result<pid_t> Spawn(const Request& request) = 0;

  // Several processes started as Spawn starts each, without waiting for each child's exec before
  // the next one starts (a step's ranks): on a busy machine a new child waits for a CPU, and the
  // spawning thread need not wait with it. One thread uses a Batch.
  class Batch {
   public:
    virtual ~Batch() = default;  // waits for what was started (no child is left mid-start)
    // Starts `request`'s process, or fails it (Spawn's errors); either way its answer comes from
    // Finish, at the index returned. The request is kept until Finish; the caller's stdout_fd and
    // stderr_fd may be closed once Start returns.
    virtual size_t Start(Request request) = 0;
    // Spawn's answer for each request started since the last Finish, in their order, once every
    // child has exec'ed or failed (a failed one reaped).
    virtual std::vector<Result<pid_t>> Finish() = 0;
    // The start time of the process of Start's `index`, as ProcessStartTime (process_info.h)
    // gives it, when the spawn knew it without reading /proc (vfork_spawn.h); 0 when it did not,
    // or before Finish.
    virtual uint64_t StartTime(size_t index) const {
      (void)index;
      return 0;
    }
  };
  // The real spawner's on Linux starts children concurrently (vfork_spawn.h's SpawnBatch); this
  // default calls Spawn at each Start.
  virtual std::unique_ptr<Batch> NewBatch();

  // kill(2): `pgid_or_pid` < 0 signals the process group -pgid_or_pid. Returns 0 on success or
  // the errno value (ESRCH when nothing is left to signal), never -1.
  virtual int Kill(pid_t pgid_or_pid, int sig) = 0;
};

// Opens (creating it 0600, and its parent directories when `create_parent`) a worker's log for
// appending, as Spawn does for Request::log_path: O_CLOEXEC, never one of descriptors 0-2. Empty
// `log_path`: /dev/null. Lets a caller open logs ahead of the spawns, off the spawning thread
// (trainlet-step does). Errors (Io) name the path.
Result<int> OpenWorkerLog(const std::string& log_path, bool create_parent = true);

// The real spawner over clone(2) on Linux (posix_spawn(3) elsewhere) and kill(2). Stateless, so
// any thread may use it. It is also what `trainlet-step` spawns ranks with (agent/step/), so it
// uses nothing but libc.
std::unique_ptr<ProcessSpawner> MakePosixProcessSpawner();

}  // namespace trainlet::platform
