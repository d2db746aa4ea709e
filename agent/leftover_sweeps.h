// When the env sweep of an ended attempt runs, if at all (process_sweep.h).
//
// Once the last rank of an attempt on this node has exited, whatever its ranks started and left
// behind (a daemon, a setsid'd child, an orted's ranks) must go, so that a deleted or failed job
// runs nothing afterwards. A step whose ranks ran in a cgroup of their own kills that cgroup and
// says so in its events file ("D C", step_records.h): nothing of it is left. When every step of
// the attempt said so, the sweep, which reads every process's environment on the host (a third
// of the agent's CPU per tiny job on a busy host), is skipped. It runs, once the attempt's steps
// are done, when any step of it had no cgroup (a host without one, macOS, cgroup "none"), died,
// or is not known here (direct workers), and also for a step that is still not done `patience`
// after its attempt's last rank (a hung one).
// Ranks of the attempt that start again on this node meanwhile (a later step of it: an
// initializer ended, then the trainer starts) put the sweep off until they end too: they carry
// the same tags, and the sweep would kill them. What the ended steps said is kept for then, since
// a step's record goes once its exits are acknowledged.
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
  struct Wait {
    Clock::time_point since;  // the attempt's last rank here ended
    bool owed = false;        // a step of it could not contain its ranks: sweep at the end
  };
  std::function<Leftovers(const std::string&, uint32_t)> leftovers_;
  std::function<void(const std::string&, uint32_t)> sweep_;
  std::chrono::milliseconds patience_;
  std::map<std::pair<std::string, uint32_t>, Wait> waiting_;
};

}  // namespace trainlet::agent
