#include "agent/cpu_allotment.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <set>
#include <utility>

#include "agent/rank_binding.h"
#include "common/cpulist.h"
#include "common/platform/cpu_affinity.h"

namespace trainlet::agent {
namespace {

std::vector<unsigned> Cpus(const std::string& list) {
  auto parsed = ParseCpuList(list);
  return parsed.ok() ? *parsed : std::vector<unsigned>{};
}

std::vector<unsigned> Intersect(const std::vector<unsigned>& a, const std::vector<unsigned>& b) {
  std::vector<unsigned> out;
  std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
  return out;
}

}  // namespace

std::string CpuGrant::SharedNote(const std::string& node) const {
  if (shared_with.empty()) return "";
  std::string jobs;
  for (const auto& j : shared_with) jobs += (jobs.empty() ? "trainjob/" : ", trainjob/") + j;
  return "CPUs " + FormatCpuList(cpus) + " of node " + node + " shared with " + jobs +
         " (no free CPUs left)";
}

CpuAllotment::CpuAllotment(std::vector<unsigned> pool, size_t first) {
  SetPool(std::move(pool), first);
}

void CpuAllotment::SetPool(std::vector<unsigned> pool, size_t first) {
  std::sort(pool.begin(), pool.end());
  pool.erase(std::unique(pool.begin(), pool.end()), pool.end());
  pool_ = std::move(pool);
  first_ = pool_.empty() ? 0 : first % pool_.size();
}

CpuGrant CpuAllotment::Take(const Key& key, uint32_t want) {
  if (!grants_.contains(key) && !pool_.empty()) {
    const size_t n = std::clamp<size_t>(want, 1, pool_.size());
    std::map<unsigned, size_t> holders;  // CPU -> how many grants hold it
    for (unsigned c : pool_) holders[c] = 0;
    for (const auto& [k, cpus] : grants_) {
      for (unsigned c : cpus) ++holders[c];
    }
    // The free CPUs first, from the first CPU on; then the least-held ones.
    std::vector<unsigned> order(pool_);
    std::rotate(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(first_), order.end());
    std::stable_sort(order.begin(), order.end(),
                     [&](unsigned a, unsigned b) { return holders[a] < holders[b]; });
    order.resize(n);
    std::sort(order.begin(), order.end());
    grants_[key] = std::move(order);
  }
  return Held(key);
}

void CpuAllotment::Restore(const Key& key, const std::vector<unsigned>& cpus) {
  if (cpus.empty()) return;
  std::vector<unsigned>& held = grants_[key];
  held.insert(held.end(), cpus.begin(), cpus.end());
  std::sort(held.begin(), held.end());
  held.erase(std::unique(held.begin(), held.end()), held.end());
}

CpuGrant CpuAllotment::Held(const Key& key) const {
  CpuGrant grant;
  auto it = grants_.find(key);
  if (it == grants_.end()) return grant;
  grant.cpus = it->second;
  grant.shared_with = SharersOf(key, grant.cpus);
  return grant;
}

void CpuAllotment::Release(const Key& key) { grants_.erase(key); }

void CpuAllotment::ReleaseOlder(const std::string& job, uint32_t attempt) {
  std::erase_if(grants_,
                [&](const auto& g) { return g.first.first == job && g.first.second < attempt; });
}

std::vector<CpuAllotment::Key> CpuAllotment::SharingWith(const Key& key) const {
  std::vector<Key> out;
  auto it = grants_.find(key);
  if (it == grants_.end()) return out;
  for (const auto& [k, held] : grants_) {
    if (k != key && !Intersect(held, it->second).empty()) out.push_back(k);
  }
  return out;
}

std::vector<v1::WorkerEvent> SharedCpuEvents(const CpuAllotment& allotment,
                                             const CpuAllotment::Key& key, const std::string& node,
                                             int64_t unix_ms) {
  std::vector<v1::WorkerEvent> out;
  if (allotment.Held(key).shared_with.empty()) return out;
  std::vector<CpuAllotment::Key> keys = allotment.SharingWith(key);
  keys.insert(keys.begin(), key);
  for (const auto& k : keys) {
    const std::string note = allotment.Held(k).SharedNote(node);
    if (note.empty()) continue;
    v1::WorkerEvent& ev = out.emplace_back();
    ev.set_job(k.first);
    ev.set_attempt(k.second);
    ev.set_node(node);
    ev.set_unix_ms(unix_ms);
    ev.set_cpus_shared("attempt " + std::to_string(k.second) + ": " + note);
  }
  return out;
}

std::vector<std::string> CpuAllotment::SharersOf(const Key& key,
                                                 const std::vector<unsigned>& cpus) const {
  std::set<std::string> jobs;
  for (const auto& [k, held] : grants_) {
    if (k != key && !Intersect(held, cpus).empty()) jobs.insert(k.first);
  }
  return {jobs.begin(), jobs.end()};
}

uint32_t CpuShare(const v1::NodeInfo& node, uint32_t pool_size, uint32_t slots) {
  // GPUs decide where a rank's CPUs are (its GPUs' NUMA nodes): those nodes keep today's rule.
  const bool gpus = std::any_of(node.accelerators().begin(), node.accelerators().end(),
                                [](const v1::Accelerator& a) { return !a.pci_bus_id().empty(); });
  const uint64_t node_slots = node.slots() != 0 ? node.slots() : pool_size;
  if (gpus || pool_size == 0 || slots >= node_slots) return pool_size;
  const uint64_t k = std::max<uint32_t>(slots, 1);
  // At least a CPU per slot held, while the node has them: a node with more slots than CPUs (a
  // test cluster's default) would otherwise put a lone 4-rank job on one CPU of two.
  const uint64_t share = std::max<uint64_t>(uint64_t{pool_size} * k / node_slots, k);
  return static_cast<uint32_t>(std::clamp<uint64_t>(share, 1, pool_size));
}

CpuGrant GrantForPlan(CpuAllotment& allotment, const v1::LaunchPlan& plan,
                      const v1::NodeInfo& node) {
  allotment.ReleaseOlder(plan.job(), plan.attempt());
  if (plan.binding() == "none") return {};
  uint32_t slots = plan.slots();
  if (slots == 0) {
    for (const auto& w : plan.workers()) {
      if (w.step().empty()) slots = std::max(slots, w.local_rank() + 1);
    }
  }
  const auto pool = static_cast<uint32_t>(allotment.pool().size());
  // Shared: the log line and the coordinator's note come from SharedCpuEvents.
  return allotment.Take({plan.job(), plan.attempt()}, CpuShare(node, pool, slots));
}

std::vector<unsigned> ExecCpus(const CpuAllotment& allotment, const CpuAllotment::Key& key) {
  std::vector<unsigned> cpus = allotment.Held(key).cpus;
  if (cpus.empty() || !platform::CpuAffinitySupported() || !CpusAvailableHere(cpus)) return {};
  return cpus;
}

void LogUnappliedCpus(const PlannedLaunches& planned) {
  if (planned.cpus_unsupported) {
    static bool told_unsupported = false;  // once per agent; only the loop gets here
    if (!std::exchange(told_unsupported, true)) {
      spdlog::info(
          "CPU bindings are given to ranks (TRAINLET_CPUSET) but not applied: this "
          "platform has no CPU affinity API");
    }
  }
  if (!planned.cpus_unavailable.empty()) spdlog::info("{}", planned.cpus_unavailable);
}

size_t FirstCpuIndex(const std::string& name, size_t pool_size) {
  if (pool_size == 0) return 0;
  size_t digits = name.size();
  while (digits > 0 && std::isdigit(static_cast<unsigned char>(name[digits - 1]))) --digits;
  digits = std::max(digits, name.size() >= 9 ? name.size() - 9 : 0);  // no overflow
  const std::string number = name.substr(digits);
  if (number.empty()) return 0;
  const size_t n = std::stoul(number);
  return n == 0 ? 0 : (n - 1) % pool_size;
}

std::vector<unsigned> TopologyCpus(const v1::Topology& topology) {
  std::set<unsigned> all;
  for (const v1::NumaNode& n : topology.numa_nodes()) {
    for (unsigned c : Cpus(n.cpuset())) all.insert(c);
  }
  return {all.begin(), all.end()};
}

v1::Topology RestrictTopology(const v1::Topology& topology, const std::vector<unsigned>& cpus) {
  v1::Topology out = topology;
  for (v1::NumaNode& n : *out.mutable_numa_nodes()) {
    n.set_cpuset(FormatCpuList(Intersect(Cpus(n.cpuset()), cpus)));
  }
  return out;
}

std::vector<v1::Accelerator> RestrictAccelerators(const std::vector<v1::Accelerator>& accelerators,
                                                  const std::vector<unsigned>& cpus) {
  std::vector<v1::Accelerator> out = accelerators;
  for (v1::Accelerator& a : out) {
    if (!a.local_cpuset().empty()) {
      a.set_local_cpuset(FormatCpuList(Intersect(Cpus(a.local_cpuset()), cpus)));
    }
  }
  return out;
}

}  // namespace trainlet::agent
