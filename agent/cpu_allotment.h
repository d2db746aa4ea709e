// CpuAllotment: which of this node's CPUs each running attempt holds, so that concurrent jobs on
// one node get disjoint CPU sets while the node has CPUs left, and share (saying with whom) only
// when it has not.
//
// An attempt's share is sized by the slots it holds here (LaunchPlan.slots): a job holding k of
// the node's S slots gets min(P, max(k, P*k/S)) of its P CPUs (at least one per slot while the
// node has them, for nodes with more slots than CPUs), the free ones from the node's first CPU
// on (FirstCpuIndex: the pool's start, rotated for agents that share one machine). A node
// with splittable GPUs hands every attempt all of its CPUs, as before: the ranks' CPUs follow
// their GPUs' NUMA nodes (rank_binding.h), and the GPUs themselves are not divided among jobs.
// When fewer CPUs are free than the share, the attempt takes every free CPU and then the ones
// the fewest other attempts hold, and its grant names the jobs it shares with.
//
// The rank bindings of the attempt are then computed inside its grant (RestrictTopology). The
// step of its ranks and of its exec sessions (an MPI launcher's orted) runs with the grant as
// its CPU affinity, so every process of the attempt on this node stays inside it.
//
// Not persisted on its own: the grant of a running attempt is in its steps' records (each rank's
// CPUs), and a restarted agent rebuilds the table from them (Restore). An attempt's grant lives
// until Release: when nothing of it runs here any more, or a newer attempt of its job arrives.
//
// Owned by the agent's loop; no locks. The pure functions may be called from any thread.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "agent/launch_planning.h"
#include "trainlet/v1/launch.pb.h"
#include "trainlet/v1/node.pb.h"

namespace trainlet::agent {

struct CpuGrant {
  std::vector<unsigned> cpus;            // sorted; empty: the node has no CPUs to hand out
  std::vector<std::string> shared_with;  // jobs holding some of `cpus` too, sorted; empty: alone
  // "CPUs 0-1 shared with trainjob/a (node node-1 has 2 CPUs)"; "" when not shared.
  std::string SharedNote(const std::string& node) const;
};

class CpuAllotment {
 public:
  using Key = std::pair<std::string, uint32_t>;  // job, attempt

  // `pool`: the CPUs this node hands out; `first`: the index in the sorted pool where the search
  // for free CPUs starts (FirstCpuIndex), wrapping around.
  explicit CpuAllotment(std::vector<unsigned> pool = {}, size_t first = 0);
  void SetPool(std::vector<unsigned> pool, size_t first = 0);
  const std::vector<unsigned>& pool() const { return pool_; }

  // The grant of `key`: the one it holds, else a new one of `want` CPUs (capped to the pool,
  // at least 1). Holding nothing else changes.
  CpuGrant Take(const Key& key, uint32_t want);
  // A previous agent's grant, read back from the attempt's step records; merged with any the
  // attempt holds already.
  void Restore(const Key& key, const std::vector<unsigned>& cpus);
  // The grant `key` holds, with the jobs it shares with now; an empty grant when it holds none.
  CpuGrant Held(const Key& key) const;
  // The other attempts holding some of `key`'s CPUs, sorted.
  std::vector<Key> SharingWith(const Key& key) const;
  bool Holds(const Key& key) const { return grants_.contains(key); }
  // Gives back the CPUs of `key` (a no-op when it holds none).
  void Release(const Key& key);
  // Gives back every grant of `job` older than `attempt`.
  void ReleaseOlder(const std::string& job, uint32_t attempt);
  size_t size() const { return grants_.size(); }

 private:
  std::vector<std::string> SharersOf(const Key& key, const std::vector<unsigned>& cpus) const;

  // Owned by the loop.
  std::vector<unsigned> pool_;
  size_t first_ = 0;
  std::map<Key, std::vector<unsigned>> grants_;
};

// How many CPUs an attempt asks for on `node`, by the rule at the top of this file: `slots` the
// slots it holds here (0: unknown, then its plan's local ranks, at least 1).
uint32_t CpuShare(const v1::NodeInfo& node, uint32_t pool_size, uint32_t slots);

// The grant of `plan`'s attempt (taken now, sized by CpuShare); older attempts of its job give
// theirs back first. An empty grant for a plan with binding "none": its ranks are not bound.
CpuGrant GrantForPlan(CpuAllotment& allotment, const v1::LaunchPlan& plan,
                      const v1::NodeInfo& node);

// What the coordinator is told when `key`'s grant (just taken) shares CPUs with other jobs: one
// WorkerEvent with cpus_shared set ("attempt 1: " + SharedNote) for it, and one for each attempt
// it shares with, whose note now names it too. Nothing when it shares with none. These reach
// `describe` as CpusShared events, also for nodes where the attempt runs no rank of its plan (an
// MPI job's other nodes, whose ranks its launcher's orted starts).
std::vector<v1::WorkerEvent> SharedCpuEvents(const CpuAllotment& allotment,
                                             const CpuAllotment::Key& key, const std::string& node,
                                             int64_t unix_ms);

// The CPU affinity of an exec session of `key` (an MPI launcher's orted): the attempt's grant,
// so the daemon and the ranks it starts stay inside it. Empty (the agent's own affinity) when
// the attempt holds none, the platform has no CPU affinity, or this process may not run on
// every CPU of the grant (an impersonated topology).
std::vector<unsigned> ExecCpus(const CpuAllotment& allotment, const CpuAllotment::Key& key);

// Logs why a plan's CPU bindings are reported but not applied: once per process when the
// platform has no CPU affinity API, and each plan whose CPUs this machine lacks. Loop only.
void LogUnappliedCpus(const PlannedLaunches& planned);

// Where node `name` starts looking for free CPUs in a pool of `pool_size`: the number its name
// ends in, less one ("node-2": 1), else 0, modulo the pool. Real nodes each have a machine of
// their own and any start serves; simulated nodes (`trainletctl local up`, the integration
// tests' namespace hosts) share one, and without it every one of them would hand its first job
// CPU 0, putting every node's ranks on one core.
size_t FirstCpuIndex(const std::string& name, size_t pool_size);

// The CPUs of `topology` (its NUMA nodes' cpusets), sorted.
std::vector<unsigned> TopologyCpus(const v1::Topology& topology);

// `topology` with every NUMA node's cpuset cut down to `cpus` (a NUMA node left without any
// keeps none), so ComputeRankBindings splits the grant among the ranks. GPUs' local cpusets are
// cut down the same way.
v1::Topology RestrictTopology(const v1::Topology& topology, const std::vector<unsigned>& cpus);
std::vector<v1::Accelerator> RestrictAccelerators(const std::vector<v1::Accelerator>& accelerators,
                                                  const std::vector<unsigned>& cpus);

}  // namespace trainlet::agent
