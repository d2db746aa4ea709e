// WorkerSupervisor: the agent's record of the worker processes (ranks) it started, and the only
// code that starts, signals and reaps them.
//
// Two kinds of worker:
//  - Ranks of a job attempt run under a step (StartStep): one `trainlet-step` process per
//    (job, attempt) on this node is their parent (agent/step/step_runner.h). It records every
//    start and exit in <steps_dir>/<step>/events, so the ranks outlive the agent (SIGTERM,
//    SIGKILL, upgrade) and a restarted agent re-adopts them with AdoptSteps() and loses no exit
//    status (DESIGN "State and scale"). A step whose process died before its ranks' exits were
//    recorded has its surviving ranks SIGKILLed and reported as exited with code 255 and the
//    message "step process died; exit status unknown".
//    trainlet-exec sessions run the same way, each under a step of its own (one rank), so a
//    session can be stopped alone (StopRank) and outlives the agent like any rank.
//    A rank whose replicated job waits for others (WorkerLaunch::waits, agent/step/step_gate.h)
//    is held by its step: StartStep answers pid 0 for it, it counts as running, and its start
//    (or its never starting) comes later, from Reap (TakeLateStarts, WorkerExit::started).
//  - Direct workers (Start): children of the agent itself, their output optionally piped to the
//    caller. They do not survive the agent: KillDirectAndWait ends them at shutdown.
//
// Threading: single-threaded. Every method is called from the agent's event loop only; there are
// no locks. The loop reads SIGCHLD from its SignalWatch; on SIGCHLD, and whenever wake_fd() is
// readable, it calls Reap(). It calls Tick() when the timeout Tick last returned has passed (and
// after Stop()). Where the platform cannot watch a step's file or an adopted step's exit (the
// portable build, platform/file_watch.h), a timer in the wake-up set makes wake_fd() readable
// every 100 ms while such steps exist.
//
// Process groups: each worker leads its own process group (pgid == pid). Signals go to the group,
// so helpers a rank started (a launcher's children, `sh -c 'a & b'`) are stopped with it. When a
// worker's leader exits, for whatever reason (normal exit, crash, Stop), its group is sent SIGKILL
// before the leader is reaped (by the agent, or by the step for its ranks): a finished rank must
// not leave children behind to hold GPUs, ports or files into the next attempt. The leader is
// still a zombie at that moment, so its pgid cannot have been reused by an unrelated group.
//
// PID reuse: a step is named by its pid and its start time (platform/process_info.h), and is
// signalled through a ProcessHandle (a pidfd on Linux), so a restarted agent never signals an
// unrelated process that got a dead step's pid.
//
// Zombies: Reap() and KillAllAndWait() reap every exited child of the agent, workers or not.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "agent/process_spawner.h"
#include "agent/rendezvous_user.h"
#include "agent/standby_step.h"
#include "agent/step/spare_files.h"
#include "agent/step/step_launch.h"
#include "agent/step/step_records.h"
#include "common/platform/file_watch.h"
#include "common/platform/periodic_timer.h"
#include "common/platform/poll_set.h"
#include "common/platform/process_cgroup.h"
#include "common/platform/process_watch.h"
#include "common/platform/wake_event.h"
#include "common/status.h"

namespace trainlet::agent {

// What a stop waits between SIGTERM and SIGKILL when the plan or exec session names no grace
// (LaunchPlan.stop_grace_ms and ExecStart.stop_grace_ms of 0).
inline constexpr std::chrono::milliseconds kDefaultStopGrace{10000};

// A warning signal a stop sends before its SIGTERM (preemption, drain --force), as Slurm's
// `--signal`: the ranks may checkpoint and exit within `grace`.
struct StopWarning {
  int signal = 0;                      // 0: no warning, SIGTERM at once
  std::chrono::milliseconds grace{0};  // the signal to SIGTERM
};

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
  std::string stderr_path;                 // not empty: stderr here, log_path has stdout only
  int stdout_fd = -1;  // >= 0: stdout goes here instead (caller's pipe); direct workers only
  int stderr_fd = -1;  // >= 0: stderr goes here instead (caller's pipe); direct workers only
  std::vector<unsigned> cpus;  // CPU affinity of the worker; empty: the agent's
  // Its replicated job (WorkerSpec.step, "" for the main one) and what that job waits for on this
  // node (LaunchPlan.steps); steps only.
  std::string step;
  std::vector<step::StepNeed> waits;
  // The job's securityContext runAsUser/runAsGroup (WorkerSpec); steps only. Its agent_run_as is
  // ignored: StepSpecFor sets Options::run_as.
  step::RunAsRequest run_as;
};

// How one worker ended.
struct WorkerExit {
  std::string job;
  uint32_t attempt = 0;
  uint32_t rank = 0;
  pid_t pid = 0;
  int exit_code = 0;    // the exit status; 128 + signal when killed by a signal, as a shell says
  int signal = 0;       // the terminating signal, 0 when it exited by itself
  std::string message;  // why the status is not the process's own (step died, start failed)
  // false: a held rank (WorkerLaunch::waits) that never started (`message` says why): report it
  // as a start failure, not an exit.
  bool started = true;
};

// A held rank that its step started once its dependencies were met.
struct LateStart {
  std::string job;
  uint32_t attempt = 0;
  uint32_t rank = 0;
  pid_t pid = 0;
};

class WorkerSupervisor {
 public:
  using Clock = std::chrono::steady_clock;

  struct Options {
    // Where step directories live (<state_dir>/steps); created 0700. Empty: StartStep and
    // AdoptSteps are unavailable (every launch fails), as in tests of direct workers.
    std::string steps_dir;
    std::string step_binary;  // absolute path of trainlet-step
    // How long StartStep waits for the step to report its ranks started.
    std::chrono::milliseconds step_start_timeout{60000};
    // Called about once a second while StartStep waits (the agent sends a heartbeat from it).
    std::function<void()> keepalive;
    // The file the agent holds an exclusive flock on while it runs, and how long steps keep their
    // ranks once nobody holds it (StepLaunch::orphan_grace_ms). "": steps never stop on their own.
    std::string agent_lock;
    std::chrono::milliseconds orphan_grace{10000};
    // The agent stamps agent_lock at least every heartbeat (StepLaunch::agent_stamps).
    bool agent_stamps = false;
    // Which cgroup hierarchy steps put their ranks in (StepLaunch::cgroup): "auto", "v2", "v1" or
    // "none".
    std::string step_cgroup = "auto";
    // Each rank's log is cut (copy-truncate to <log>.1) past this many bytes
    // (StepLaunch::log_max_bytes, agent/step/log_rotation.h); 0: never.
    uint64_t log_max_bytes = 0;
    // The agent config's run_as: who steps run ranks as unless the job says (StepRank::run_as).
    std::string run_as;
    // Where empty files are made ahead for the ranks' logs (agent/step/spare_files.h), after each
    // step start, as many as its ranks; "": <steps_dir>/../spare-files.
    std::string spare_dir;
    // Keep one step started ahead of the next launch, in its cgroup already (StandbyStep, after
    // the first launch; Linux only); its log is <steps_dir>/../standby-step.log.
    bool step_standby = false;
  };

  // `spawner` is not owned and must outlive the supervisor. `base_env` ("K=V" entries) is the
  // environment every worker starts from, normally the agent's own environ.
  WorkerSupervisor(ProcessSpawner* spawner, std::vector<std::string> base_env, Options options);
  // Direct workers only (no steps directory).
  WorkerSupervisor(ProcessSpawner* spawner, std::vector<std::string> base_env);
  WorkerSupervisor(const WorkerSupervisor&) = delete;
  WorkerSupervisor& operator=(const WorkerSupervisor&) = delete;
  // Kills nothing: steps and their ranks outlive the agent, and a new supervisor over the same
  // steps_dir adopts them. Direct workers are orphaned: call KillDirectAndWait() first.
  ~WorkerSupervisor();

  // Starts one direct worker (a child of the agent) and records it. Its env is base_env with
  // launch.env set on top. Errors: Invalid (empty argv, attempt 0), Exists (that
  // job/attempt/rank is already running), or the spawner's error prefixed with the rank;
  // nothing is recorded when Start fails.
  Result<pid_t> Start(const WorkerLaunch& launch);

  // Starts `launches`, ranks of one (job, attempt), under a new step process, and returns one
  // result per launch, in order: the rank's pid (0: held until its dependencies are met), or why
  // it did not start (the same checks as
  // Start, or the step's spawn error naming argv[0], or the step's own failure). Blocks the loop
  // until the step has spawned every rank (about what spawning them directly costs, plus one
  // exec), at most Options::step_start_timeout. `stop_grace` is what the step waits between
  // SIGTERM and SIGKILL when stopped while no agent runs. Taken by value: each launch's env
  // moves into the step's launch file, not copied (a launch's path).
  std::vector<Result<pid_t>> StartStep(std::vector<WorkerLaunch> launches,
                                       std::chrono::milliseconds stop_grace);

  // What AdoptSteps found: one entry per step directory that belongs to a job attempt.
  struct AdoptedStep {
    std::string job;
    uint32_t attempt = 0;
    uint32_t stop_grace_ms = 0;
    size_t running = 0;  // ranks alive under a live step
    size_t exited = 0;   // exits recorded while no agent was there (reported by the next Reap)
    bool step_alive = false;
    std::vector<uint32_t> ranks;   // every rank of the step, from its launch file
    AdoptedRendezvous rendezvous;  // what its ranks had of the node's rendezvous (its token...)
    std::vector<unsigned> cpus;    // every CPU its ranks were bound to (cpu_allotment.h)
  };
  // Re-adopts every step left in steps_dir by a previous agent: live steps (same pid and start
  // time) keep their running ranks, recorded exits are returned by the next Reap() (again, if
  // the previous agent had reported them: the coordinator ignores repeats), and ranks of steps
  // that died unrecorded are SIGKILLed and reported as exited with an unknown status. Call once,
  // before any StartStep. Unreadable step directories are logged and left alone.
  std::vector<AdoptedStep> AdoptSteps();

  // A descriptor for the loop's poll set: readable when a step has written records, an adopted
  // step has ended, or adopted exits wait; then call Reap(). -1 without a steps_dir.
  int wake_fd() const { return wake_ ? wake_->fd() : -1; }

  // Delivery bookkeeping for step ranks, so that a step's directory, the only durable record of
  // its exits, is removed only once the coordinator has them: the agent numbers each reported
  // exit (ExitReported) and passes on the coordinator's cumulative acknowledgements.
  void ExitReported(const WorkerExit& exit, uint64_t seq);
  void ReportsAcked(uint64_t seq);
  // For ranks whose exit the caller delivers by its own means (exec sessions): the exit of
  // (job, attempt, rank) needs no acknowledgement; its step's directory goes once the step is done.
  void ExitDelivered(const std::string& job, uint32_t attempt, uint32_t rank);
  // True when a step knows the rank (started, failed to start, or exited with the exit not yet
  // delivered): its exit comes, or came, from Reap. False for direct workers.
  bool StepKnows(const std::string& job, uint32_t attempt, uint32_t rank) const;

  // Asks every worker of (job, attempt) to stop, or of every attempt of the job when attempt is 0:
  // SIGTERM to its process group now, SIGKILL once `grace` has passed (sent by Tick; at once when
  // grace <= 0). Idempotent: a worker already stopping gets no second SIGTERM; a shorter grace
  // brings its SIGKILL forward, a longer one never delays it. The exits still come from Reap().
  // A step is asked instead (SIGTERM, then SIGUSR1 for "SIGKILL now"), and it signals its ranks.
  // With a `warning`, the group first gets warning.signal and SIGTERM comes warning.grace later
  // (for a step, the step times it: step_stop.h), SIGKILL `grace` after that. A stop that comes
  // while a warning runs keeps it: its SIGKILL is counted from the warning's end (a grace <= 0,
  // SIGKILL now, still kills at once).
  void Stop(const std::string& job, uint32_t attempt, std::chrono::milliseconds grace,
            Clock::time_point now, const StopWarning& warning = {});
  // Sends `signal` to every worker of (job, attempt) (every attempt when 0) that is not stopping,
  // and stops nothing: the warning before an active deadline. A step is asked (SIGUSR2).
  void Warn(const std::string& job, uint32_t attempt, int signal);
  // The same for one worker of an attempt: a direct worker, or the only live rank of its step
  // (an exec session's). A rank that shares its step with others is stopped with its step only;
  // for it this logs a warning and does nothing.
  void StopRank(const std::string& job, uint32_t attempt, uint32_t rank,
                std::chrono::milliseconds grace, Clock::time_point now);

  // Reaps every exited child without blocking, until none is left, and reads what the steps
  // recorded. Returns the exits of known workers, which are then forgotten; other children are
  // reaped and logged. Each exited direct worker's process group is sent SIGKILL first (see the
  // top of this file).
  std::vector<WorkerExit> Reap();
  // The held ranks the steps started since the last call (read by Reap): report them started
  // before the exits Reap returned, which may include theirs.
  std::vector<LateStart> TakeLateStarts() { return std::exchange(late_starts_, {}); }

  // Sends the SIGKILLs that are due at `now`. Returns the time until the next one, rounded up to a
  // whole millisecond, or nullopt when none is pending.
  std::optional<std::chrono::milliseconds> Tick(Clock::time_point now);

  // Workers started (or adopted) and not yet reaped (a stopping worker still counts).
  size_t running() const;
  size_t running(const std::string& job) const;
  bool IsRunning(const std::string& job, uint32_t attempt, uint32_t rank) const;
  // What is known here of what an attempt's ranks left on this node (leftover_sweeps.h).
  struct Leftovers {
    bool running = false;      // ranks of it run here (a later step of it): nothing to sweep now
    bool winding = false;      // a step of it is still ending its strays
    bool uncontained = false;  // a step of it ended without its cgroup's word that nothing is
                               // left ("D C"): it had none, or died; or no step of it is known
  };
  Leftovers LeftoversOf(const std::string& job, uint32_t attempt) const;
  // Where spare files and dirs are made ahead (Options::spare_dir; "" before InitSteps or
  // without a steps_dir), for the launch's own dirs (agent/step/spare_files.h).
  const std::string& spare_dir() const { return options_.spare_dir; }
  // Every worker still running: (job, attempt, rank, pid), for a registration report. Held ranks
  // (not started yet) are not listed.
  struct RunningWorker {
    std::string job;
    uint32_t attempt;
    uint32_t rank;
    pid_t pid;
  };
  std::vector<RunningWorker> Running() const;
  // How many of Running() are of (job, attempt), every attempt of `job` for 0; nothing is copied.
  size_t RunningOf(const std::string& job, uint32_t attempt) const;
  // How the workspace reached the ranks of (job, attempt)'s newest step, as that step wrote it
  // (agent/step/workspace_mount.h); "" when unknown.
  std::string StepWorkspace(const std::string& job, uint32_t attempt) const;
  // Who `rank` of (job, attempt) was asked to run as, from its step's launch file
  // (StepRank::run_as, agent_run_as included); nullopt when no step of the attempt knows the rank.
  std::optional<step::RunAsRequest> RankRunAs(const std::string& job, uint32_t attempt,
                                              uint32_t rank) const;
  // The standby step waiting for the next launch (StandbyStep); 0 when none waits.
  pid_t standby_pid() const { return standby_ ? standby_->pid() : 0; }
  // Step processes known (running, or ended with exits not yet acknowledged).
  size_t steps() const { return steps_.size(); }
  // The coordinator's partition grace, for steps started from now on (Options::orphan_grace).
  void set_orphan_grace(std::chrono::milliseconds grace) { options_.orphan_grace = grace; }

  // Shutdown that stops the work: SIGKILL every direct worker's group and tell every step to
  // SIGKILL its ranks, then reap until every worker is gone and every step process has ended,
  // or `timeout` has passed. Blocks the loop (by design: nothing else runs during shutdown),
  // polling Reap() with short sleeps rather than waiting on SIGCHLD, which belongs to the
  // loop's SignalWatch. Workers not reaped by the deadline are logged and stay recorded.
  std::vector<WorkerExit> KillAllAndWait(std::chrono::milliseconds timeout);
  // Shutdown that leaves the steps running for the next agent: the same for direct workers only.
  std::vector<WorkerExit> KillDirectAndWait(std::chrono::milliseconds timeout);

 private:
  struct Worker {
    std::string job;
    uint32_t attempt = 0;
    uint32_t rank = 0;
    uint32_t local_rank = 0;
    pid_t pid = 0;  // also the pgid
    bool term_sent = false;
    bool kill_sent = false;
    std::optional<Clock::time_point> term_at;  // pending SIGTERM of a warned stop
    std::optional<Clock::time_point> kill_at;  // pending SIGKILL, set by Stop
  };
  struct StepRankState {
    pid_t pid = 0;
    uint64_t start_time = 0;
  };
  struct Step {
    std::string dir;
    std::string job;
    uint32_t attempt = 0;
    uint32_t stop_grace_ms = 0;
    pid_t pid = 0;
    uint64_t start_time = 0;
    platform::ProcessHandle process;  // invalid once gone, or if it could not be opened
    bool child = false;               // our child: reaped by Reap's waitid
    bool gone = false;                // the step process has ended
    bool done = false;                // D read: every rank's exit is recorded
    bool contained = false;           // its D said C: nothing of its ranks is left
    bool cgroup_ended = false;        // gone: its ranks' cgroup was killed (EndDeadStepCgroup)
    bool corrupt = false;             // the events file holds bytes that are not records
    int events_fd = -1;
    int watch = -1;       // FileWatch handle of the events file
    uint64_t offset = 0;  // bytes of the events file parsed
    std::string partial;  // an unfinished last line
    bool term_sent = false;
    bool kill_sent = false;
    std::optional<Clock::time_point> warning_ends;  // a warned stop's SIGTERM (the step sends it)
    bool stop_requests = false;  // the step takes stop and warning requests (StepLaunch)
    std::optional<Clock::time_point> kill_at;
    std::map<uint32_t, StepRankState> live;         // rank -> running rank
    std::set<uint32_t> known;                       // ranks with an S or F record
    std::map<uint32_t, uint64_t> returned;          // rank -> seq of its report (0: not yet)
    std::string workspace;                          // its workspace note, read once it is ready
    std::map<uint32_t, step::RunAsRequest> run_as;  // rank -> its launch file's run_as
  };

  Status ValidateLaunch(const WorkerLaunch& launch, const std::string& who) const;
  void SignalGroup(const Worker& w, int sig);
  void StopWorker(pid_t pid, Worker& w, std::chrono::milliseconds grace, Clock::time_point now,
                  const StopWarning& warning);
  // worker_supervisor_steps.cpp
  Status InitSteps();
  // The step's process for `dir`: the standby (StandbyStep) or a new one; `ready_fd` gets the
  // descriptor its "ready" line comes on.
  Result<pid_t> StartStepProcess(const std::string& dir, int& ready_fd);
  // StartStep's steps, in order: the launch file's spec (refused launches get their error in
  // `results`), the step's directory and process (`ready_fd`: the read end of its ready pipe),
  // the wait for its "ready", and the starts it recorded, put into `results`. Private helpers
  // push the class past 25 methods; they are StartStep's pieces, not new behaviour.
  // Moves each accepted launch's env into the spec (`launches` keep the rest).
  step::StepLaunch StepSpecFor(std::vector<WorkerLaunch>& launches,
                               std::chrono::milliseconds stop_grace,
                               std::vector<Result<pid_t>>& results,
                               std::vector<size_t>& index) const;
  Status SpawnStep(const step::StepLaunch& spec, Step& s, int& ready_fd);
  bool WaitStepReady(int ready_fd) const;  // closes ready_fd
  void ReportStepStarts(Step& s, const std::vector<WorkerLaunch>& launches,
                        const std::vector<size_t>& index, bool is_ready,
                        std::vector<step::StepRecord>& records,
                        std::vector<Result<pid_t>>& results);
  void SignalStep(Step& s, int sig);
  void StopStep(Step& s, std::chrono::milliseconds grace, Clock::time_point now,
                const StopWarning& warning);
  // Writes the step's stop or warn request (step_stop.h); false, logged, when it cannot.
  bool WriteStepRequest(const Step& s, const char* file, const StopWarning& warning);
  void EndDeadStepCgroup(Step& s);
  void ReadNewRecords(Step& s, std::vector<step::StepRecord>* out);
  void ApplyStepRecords(Step& s, const std::vector<step::StepRecord>& records,
                        std::vector<WorkerExit>* exits);
  void CheckStepAlive(Step& s);
  void EndDeadStep(Step& s, std::vector<WorkerExit>* exits);
  void ReapSteps(std::vector<WorkerExit>* exits);
  void RemoveFinishedSteps();
  void CloseStep(Step& s);
  // Some step's records or exit can only be found by looking (no kernel notification).
  bool StepsPolled() const;
  // Adds the poll timer to the wake-up set while StepsPolled(), and removes it after.
  void UpdatePolling();
  std::vector<WorkerExit> WaitGone(std::chrono::milliseconds timeout, bool steps_too);

  // Constant after construction.
  ProcessSpawner* const spawner_;
  const std::vector<std::string> base_env_;
  Options options_;  // constant but for orphan_grace (set_orphan_grace)
  // Null without a steps_dir. wake_ holds files_, pending_ and adopted steps' exit watches.
  std::unique_ptr<platform::FileWatch> files_;    // the steps' events files
  std::unique_ptr<platform::WakeEvent> pending_;  // exits wait for Reap (adopted, or early)
  std::unique_ptr<platform::PollSet> wake_;
  std::unique_ptr<platform::PeriodicTimer> poll_timer_;  // in wake_ while StepsPolled()
  std::unique_ptr<step::SpareFileFiller> spares_;        // null without a steps_dir
  std::unique_ptr<StandbyStep> standby_;                 // null unless Options::step_standby

  // Owned by the loop.
  std::map<pid_t, Worker> workers_;  // direct workers by pid
  std::map<int, Step> steps_;        // by step id
  int next_step_id_ = 1;
  std::vector<WorkerExit> pending_exits_;  // found by AdoptSteps, returned by the next Reap
  std::vector<LateStart> late_starts_;     // held ranks started, for TakeLateStarts
  // Cgroups of dead steps, killed, each removed once it is empty (ReapSteps).
  std::vector<std::unique_ptr<platform::ProcessCgroup>> dead_cgroups_;
  uint64_t acked_through_ = 0;
};

}  // namespace trainlet::agent
