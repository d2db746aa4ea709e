// StandbyStep: the one trainlet-step this node keeps started ahead of its next launch, already in
// its ranks' cgroup (agent/step/step_standby.h says why: a move into a cgroup waits for an RCU
// grace period, 6-16 ms here, which a launch otherwise waits for before its first rank).
//
// Life: none until a step has started on this node (an agent that never launches keeps none);
// then one is started once no step has started for `quiet`, and again after each launch that
// took it. `quiet` is short: the StepStarted that sets it comes once the step's ranks all run,
// and a launch that follows at once (a loop of jobs; bench/launch) must find the next standby
// in its cgroup already, 10-20 ms later. Its CPU (a spawn and an exec, about 1 ms) then falls
// on the tail of the launch before; at 50 ms it came too late for the next one. A launch takes it
// (Take) instead of spawning a step; it is then an ordinary step of the WorkerSupervisor. When
// there is none (not started yet, died, or its hand-over failed) the launch spawns a step as
// before: a standby only ever saves time.
//
// Its process: `trainlet-step --standby MODE`, a child of the agent leading its own session, its
// stdout one end of a socket pair whose other end is kept here: the hand-over goes down it, and
// the step's "ready" line comes back up it. Dropping that end (Take's failure, the destructor, an
// agent that dies) makes a waiting standby leave and remove its cgroup and exit.
//
// Threading: the agent's loop only (through the WorkerSupervisor, which owns it and reaps it).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>

#include "agent/process_spawner.h"

namespace trainlet::agent {

class StandbyStep {
 public:
  using Clock = std::chrono::steady_clock;
  struct Options {
    std::string step_binary;             // absolute path of trainlet-step
    std::string cgroup_mode = "auto";    // StepLaunch::cgroup of the steps it stands in for
    std::string log_path;                // its stderr until a launch takes it (appended)
    std::chrono::milliseconds quiet{5};  // no step started for this long before it starts
  };
  // `spawner` is not owned and must outlive this.
  StandbyStep(ProcessSpawner* spawner, Options options);
  // Drops a waiting standby (it exits by itself) and reaps it, waiting at most a second.
  ~StandbyStep();
  StandbyStep(const StandbyStep&) = delete;
  StandbyStep& operator=(const StandbyStep&) = delete;

  // A step started at `now` (whichever way): a standby is wanted once `quiet` has passed.
  void StepStarted(Clock::time_point now);
  // Starts the standby when one is wanted and `quiet` has passed; a failed spawn is logged and
  // not retried before the next StepStarted. Returns when to call again, nullopt for never.
  std::optional<Clock::time_point> Tick(Clock::time_point now);

  // The waiting standby, handed the step directory `dir` (absolute): from now on it is that
  // step, and `ready_fd` is the caller's to read its "ready\n" from (as from a spawned step's
  // stdout pipe) and to close. nullopt when none waits, or when the hand-over could not be
  // written (the standby is then dropped).
  struct Taken {
    pid_t pid = 0;
    int ready_fd = -1;
  };
  std::optional<Taken> Take(const std::string& dir);

  // True when `pid` is a standby's (the caller reaped it): it is forgotten. One that ended while
  // waiting is replaced only after the next step start, not at once (one that dies would die
  // again, every `quiet`).
  bool Reaped(pid_t pid, Clock::time_point now);

  // The waiting standby's pid; 0 when none waits.
  pid_t pid() const { return pid_; }

 private:
  Status Start();
  void Drop();

  // Constant after construction.
  ProcessSpawner* const spawner_;
  const Options options_;
  // Owned by the loop.
  pid_t pid_ = 0;                               // the waiting standby, 0 when none
  int socket_ = -1;                             // our end of its stdout socket pair
  std::optional<Clock::time_point> wanted_at_;  // when to start the next one; none: not wanted
  pid_t dropped_ = 0;                           // a dropped standby not reaped yet
};

}  // namespace trainlet::agent
