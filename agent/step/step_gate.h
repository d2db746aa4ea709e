// StepGate: which workers of one trainlet-step may start, by their replicated jobs' dependsOn
// (LaunchPlan.steps, StepLaunch::steps), as this node sees them.
//
// A worker whose replicated job (StepRank::step) waits for others is held until every
// dependency is met among the workers of this step process (this node's):
//   "Ready"    every worker of that replicated job here has started;
//   "Complete" every worker of it here has exited 0.
// A replicated job with no worker here meets both at once (nothing to wait for on this node). A
// dependency that can no longer be met (a worker of it failed to start, or exited non-zero for
// "Complete", or will never start itself) dooms the held workers: they are never started, and
// the caller records each with the reason the gate gives. A stop releases every held worker as
// never started too, so the step process still ends.
//
// Pure bookkeeping: no I/O, no clock; one thread (trainlet-step's loop).
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "agent/step/step_launch.h"

namespace trainlet::step {

class StepGate {
 public:
  // `workers`: each worker's replicated job, indexed like StepLaunch::ranks. `steps`: what waits
  // for what. A dependency on a replicated job no worker here belongs to is met.
  StepGate(std::vector<std::string> workers, const std::vector<StepOrder>& steps);

  // Workers not yet handed out whose dependencies are met, in index order; each is handed out
  // once. The caller starts them and reports each with Started or StartFailed.
  std::vector<size_t> TakeStartable();
  // Held workers whose dependencies can no longer be met, with the reason to record ("not
  // started: dependency dataset-initializer failed"); each is handed out once and counts as
  // never started from then on.
  std::vector<std::pair<size_t, std::string>> TakeDoomed();
  // A stop: every held worker, with `reason`, counts as never started.
  std::vector<std::pair<size_t, std::string>> ReleaseHeld(const std::string& reason);

  void Started(size_t worker);
  void StartFailed(size_t worker);
  void Exited(size_t worker, bool zero);

  // Some worker is still held (neither handed out nor released).
  bool holding() const;

 private:
  enum class State { kHeld, kHandedOut, kStarted, kExitedZero, kFailed, kNeverStarted };
  // Whether `need` is met, or can never be met (`doomed`), among this node's workers.
  bool Met(const StepNeed& need, bool* doomed) const;
  const std::vector<StepNeed>& NeedsOf(size_t worker) const;

  std::vector<std::string> step_of_;  // by worker
  std::vector<State> state_;          // by worker
  std::vector<StepOrder> steps_;
};

}  // namespace trainlet::step
