// When the env sweep of an ended attempt runs, if at all (process_sweep.h).
//
// Once the last rank of an attempt on this node has exited, whatever its ranks started and left
// behind (a daemon, a setsid'd child, an orted's ranks) must go, so that a deleted or failed job
// runs nothing afterwards. A step whose ranks ran in a cgroup of their own kills that cgroup and
// says so in its events file ("D C", step_records.h): nothing is left, and the sweep, which reads
// every process's environment on the host, is skipped. It was a third of the agent's CPU per
// tiny job on a busy host. The sweep still runs, once the attempt's steps have ended, for a step
// without a cgroup (a host without one, macOS, cgroup "none"), a step that died, direct workers,
// and a step that has not ended `patience` after its last rank (a hung one).
//
// On the agent's loop; no locks.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "agent/worker_supervisor.h"

namespace trainlet::agent {

class LeftoverSweeps {
 public:
  using Clock = std::chrono::steady_clock;
  using Leftovers = WorkerSupervisor::Leftovers;
  // `leftovers(job, attempt)`: WorkerSupervisor::LeftoversOf. `sweep(job, attempt)`: the env sweep.
  LeftoverSweeps(std::function<Leftovers(const std::string&, uint32_t)> leftovers,
                 std::function<void(const std::string&, uint32_t)> sweep,
                 std::chrono::milliseconds patience = std::chrono::seconds(10))
      : leftovers_(std::move(leftovers)), sweep_(std::move(sweep)), patience_(patience) {}

  // The attempt's last rank on this node has exited.
  void Ended(const std::string& job, uint32_t attempt, Clock::time_point now);
  // Sweeps, or lets go, each ended attempt whose steps are done; sweeps those that waited past
  // the patience. Returns when the next one's patience runs out, if any waits.
  std::optional<Clock::time_point> Run(Clock::time_point now);
  // Whether an attempt of `job` waits here (its data is not purged meanwhile: job_data_purge.h).
  bool Waiting(const std::string& job) const;

 private:
  std::function<Leftovers(const std::string&, uint32_t)> leftovers_;
  std::function<void(const std::string&, uint32_t)> sweep_;
  std::chrono::milliseconds patience_;
  std::map<std::pair<std::string, uint32_t>, Clock::time_point> waiting_;  // -> since
};

}  // namespace trainlet::agent
