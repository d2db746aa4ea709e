// WorkerSupervisor: the agent's record of the worker processes (ranks) it started, and the only
// code that starts, signals and reaps them.
//
// Threading: single-threaded. Every method is called from the agent's event loop only; there are
// no locks. The loop blocks SIGCHLD and reads it from a signalfd; on SIGCHLD it calls Reap(), and
// it calls Tick() when the timeout Tick last returned has passed (and after Stop()).
//
// Process groups: each worker leads its own process group (pgid == pid). Signals go to the group,
// so helpers a rank started (a launcher's children, `sh -c 'a & b'`) are stopped with it. When a
// worker's leader exits, for whatever reason (normal exit, crash, Stop), its group is sent SIGKILL
// before the leader is reaped: a finished rank must not leave children behind to hold GPUs, ports
// or files into the next attempt. The leader is still a zombie at that moment, so its pgid cannot
// have been reused by an unrelated group.
//
// Zombies: Reap() and KillAllAndWait() reap every exited child of the agent, workers or not.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "agent/process_spawner.h"
#include "common/status.h"

namespace trainlet::agent {

// One rank to start on this node.
struct WorkerLaunch {
  std::string job;
  uint32_t attempt = 0;  // >= 1; 0 is reserved for "every attempt" in Stop()
  uint32_t rank = 0;     // global rank in the job
  uint32_t local_rank = 0;
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;  // set on top of the supervisor's base env
  std::string cwd;                         // empty: the agent's cwd
  std::string log_path;                    // stdout+stderr, appended; empty: discarded
  int stdout_fd = -1;                      // >= 0: stdout goes here instead (caller's pipe)
  int stderr_fd = -1;                      // >= 0: stderr goes here instead (caller's pipe)
  std::vector<unsigned> cpus;              // CPU affinity of the worker; empty: the agent's
};

// How one worker ended.
struct WorkerExit {
  std::string job;
  uint32_t attempt = 0;
  uint32_t rank = 0;
  pid_t pid = 0;
  int exit_code = 0;  // the exit status; 128 + signal when killed by a signal, as a shell says
  int signal = 0;     // the terminating signal, 0 when it exited by itself
};

class WorkerSupervisor {
 public:
  using Clock = std::chrono::steady_clock;

  // `spawner` is not owned and must outlive the supervisor. `base_env` ("K=V" entries) is the
  // environment every worker starts from, normally the agent's own environ.
  WorkerSupervisor(ProcessSpawner* spawner, std::vector<std::string> base_env);
  WorkerSupervisor(const WorkerSupervisor&) = delete;
  WorkerSupervisor& operator=(const WorkerSupervisor&) = delete;
  // Does not kill the workers: they may outlive the agent (see DESIGN "State and scale"). Call
  // KillAllAndWait() first to stop them.
  ~WorkerSupervisor() = default;

  // Starts one worker and records it. Its env is base_env with launch.env set on top. Errors:
  // Invalid (empty argv, attempt 0), Exists (that job/attempt/rank is already running), or the
  // spawner's error prefixed with the rank; nothing is recorded when Start fails.
  Result<pid_t> Start(const WorkerLaunch& launch);

  // Asks every worker of (job, attempt) to stop, or of every attempt of the job when attempt is 0:
  // SIGTERM to its process group now, SIGKILL once `grace` has passed (sent by Tick; at once when
  // grace <= 0). Idempotent: a worker already stopping gets no second SIGTERM; a shorter grace
  // brings its SIGKILL forward, a longer one never delays it. The exits still come from Reap().
  void Stop(const std::string& job, uint32_t attempt, std::chrono::milliseconds grace,
            Clock::time_point now);
  // The same for one worker of an attempt.
  void StopRank(const std::string& job, uint32_t attempt, uint32_t rank,
                std::chrono::milliseconds grace, Clock::time_point now);

  // Reaps every exited child without blocking, until none is left. Returns the exits of known
  // workers, which are then forgotten; other children are reaped and logged. Each exited worker's
  // process group is sent SIGKILL first (see the top of this file).
  std::vector<WorkerExit> Reap();

  // Sends the SIGKILLs that are due at `now`. Returns the time until the next one, rounded up to a
  // whole millisecond, or nullopt when none is pending.
  std::optional<std::chrono::milliseconds> Tick(Clock::time_point now);

  // Workers started and not yet reaped (a stopping worker still counts).
  size_t running() const { return workers_.size(); }
  size_t running(const std::string& job) const;
  bool IsRunning(const std::string& job, uint32_t attempt, uint32_t rank) const;
  // Every worker still running: (job, attempt, rank, pid), for a registration report.
  struct RunningWorker {
    std::string job;
    uint32_t attempt;
    uint32_t rank;
    pid_t pid;
  };
  std::vector<RunningWorker> Running() const;

  // Shutdown: SIGKILL every worker's group, then reap until every worker is gone or `timeout` has
  // passed. Blocks the loop (by design: nothing else runs during shutdown), polling Reap() with
  // short sleeps rather than waiting on SIGCHLD, which belongs to the loop's signalfd. Workers not
  // reaped by the deadline are logged and stay recorded.
  std::vector<WorkerExit> KillAllAndWait(std::chrono::milliseconds timeout);

 private:
  struct Worker {
    std::string job;
    uint32_t attempt = 0;
    uint32_t rank = 0;
    uint32_t local_rank = 0;
    pid_t pid = 0;  // also the pgid
    bool term_sent = false;
    bool kill_sent = false;
    std::optional<Clock::time_point> kill_at;  // pending SIGKILL, set by Stop
  };

  std::vector<std::string> BuildEnv(const std::map<std::string, std::string>& overrides) const;
  void SignalGroup(const Worker& w, int sig);
  void StopWorker(pid_t pid, Worker& w, std::chrono::milliseconds grace, Clock::time_point now);

  // Constant after construction.
  ProcessSpawner* const spawner_;
  const std::vector<std::string> base_env_;

  // Owned by the loop: live workers by pid.
  std::map<pid_t, Worker> workers_;
};

}  // namespace trainlet::agent
