#include "agent/rank_binding.h"

#include <algorithm>
#include <set>

#include "common/cpulist.h"
#include "common/platform/cpu_affinity.h"

namespace trainlet::agent {
namespace {

std::vector<unsigned> Cpus(const std::string& list) {
  auto parsed = ParseCpuList(list);
  return parsed.ok() ? *parsed : std::vector<unsigned>{};
}

// Piece `piece` of `pieces` of every run of consecutive numbers in sorted `pus`.
std::vector<unsigned> Piece(const std::vector<unsigned>& pus, size_t piece, size_t pieces) {
  std::vector<unsigned> out;
  size_t start = 0;
  while (start < pus.size()) {
    size_t end = start + 1;
    while (end < pus.size() && pus[end] == pus[end - 1] + 1) ++end;
    const size_t len = end - start;
    for (size_t i = start + len * piece / pieces; i < start + len * (piece + 1) / pieces; ++i) {
      out.push_back(pus[i]);
    }
    start = end;
  }
  return out;
}

}  // namespace

std::string RankBinding::CpuList() const { return FormatCpuList(cpus); }

std::string RankBinding::DeviceList() const {
  if (devices.empty()) return "";
  std::string out = vendor + ":";
  for (size_t i = 0; i < devices.size(); ++i) out += (i ? "," : "") + std::to_string(devices[i]);
  return out;
}

std::vector<RankBinding> ComputeRankBindings(const v1::Topology& topology,
                                             const std::vector<v1::Accelerator>& accelerators,
                                             uint32_t local_ranks) {
  std::vector<RankBinding> out(local_ranks);
  if (local_ranks == 0) return out;
  for (uint32_t r = 0; r < local_ranks; ++r) out[r].local_rank = r;

  // The splittable accelerators of the vendor with the most of them.
  std::map<std::string, std::vector<const v1::Accelerator*>> by_vendor;
  std::vector<std::string> vendor_order;
  for (const v1::Accelerator& a : accelerators) {
    if (a.pci_bus_id().empty()) continue;  // an Apple SoC: one GPU for the whole machine
    if (!by_vendor.contains(a.vendor())) vendor_order.push_back(a.vendor());
    by_vendor[a.vendor()].push_back(&a);
  }
  std::vector<const v1::Accelerator*> gpus;
  std::string vendor;
  for (const std::string& v : vendor_order) {
    if (by_vendor[v].size() > gpus.size()) {
      gpus = by_vendor[v];
      vendor = v;
    }
  }
  std::sort(gpus.begin(), gpus.end(),
            [](const auto* a, const auto* b) { return a->index() < b->index(); });

  std::map<uint32_t, std::vector<unsigned>> numa_pus;  // NUMA nodes that have CPUs
  for (const v1::NumaNode& n : topology.numa_nodes()) {
    auto pus = Cpus(n.cpuset());
    if (!pus.empty()) numa_pus[n.os_index()] = std::move(pus);
  }
  std::vector<uint32_t> numa_ids;
  for (const auto& [id, pus] : numa_pus) numa_ids.push_back(id);

  // Each rank's home, as a key, and the PUs of each home.
  std::vector<std::string> home(local_ranks);
  std::map<std::string, std::vector<unsigned>> home_pus;
  const size_t g = gpus.size(), l = local_ranks;
  for (size_t r = 0; r < l; ++r) {
    RankBinding& b = out[r];
    std::set<uint32_t> nodes;
    std::set<unsigned> fallback;  // local cpusets of GPUs without a known NUMA node
    if (g > 0) {
      b.vendor = vendor;
      const size_t lo = r * g / l;
      const size_t hi = l <= g ? (r + 1) * g / l : lo + 1;
      for (size_t i = lo; i < hi; ++i) {
        b.devices.push_back(gpus[i]->index());
        if (gpus[i]->numa_node() >= 0 && numa_pus.contains(gpus[i]->numa_node())) {
          nodes.insert(static_cast<uint32_t>(gpus[i]->numa_node()));
        } else {
          for (unsigned c : Cpus(gpus[i]->local_cpuset())) fallback.insert(c);
        }
      }
    } else if (!numa_ids.empty()) {
      const size_t n = numa_ids.size();
      const size_t lo = r * n / l;
      const size_t hi = std::max(lo + 1, (r + 1) * n / l);
      for (size_t i = lo; i < hi; ++i) nodes.insert(numa_ids[i]);
    }
    std::string key;
    std::set<unsigned> pus(fallback);
    for (uint32_t id : nodes) {
      key += "numa" + std::to_string(id) + ";";
      pus.insert(numa_pus[id].begin(), numa_pus[id].end());
    }
    if (nodes.empty() && !fallback.empty()) {
      key = "cpus" + FormatCpuList({fallback.begin(), fallback.end()});
    }
    home[r] = key;
    if (!key.empty()) home_pus[key] = {pus.begin(), pus.end()};
  }

  // The ranks of one home split its PUs, in local-rank order.
  std::map<std::string, std::vector<size_t>> members;
  for (size_t r = 0; r < l; ++r) {
    if (!home[r].empty()) members[home[r]].push_back(r);
  }
  for (const auto& [key, ranks] : members) {
    const std::vector<unsigned>& pus = home_pus[key];
    for (size_t i = 0; i < ranks.size(); ++i) {
      std::vector<unsigned> mine = Piece(pus, i, ranks.size());
      out[ranks[i]].cpus = mine.empty() ? pus : std::move(mine);  // more ranks than PUs: share
    }
  }
  return out;
}

std::map<std::string, std::string> BindingEnv(
    const RankBinding& binding, const std::vector<std::unique_ptr<AcceleratorPlugin>>& plugins) {
  std::map<std::string, std::string> env;
  if (!binding.devices.empty()) {
    for (const auto& p : plugins) {
      if (p->name() == binding.vendor) env = p->VisibleDevicesEnv(binding.devices);
    }
  }
  if (!binding.cpus.empty()) env["TRAINLET_CPUSET"] = binding.CpuList();
  return env;
}

bool CpusAvailableHere(const std::vector<unsigned>& cpus) {
  const std::vector<unsigned> mine = platform::ThisThreadCpus();  // sorted
  return std::all_of(cpus.begin(), cpus.end(), [&](unsigned c) {
    return std::binary_search(mine.begin(), mine.end(), c);
  });
}

AcceleratorEnv AcceleratorEnvFor(const std::string& topology_xml) {
  AcceleratorEnv env;
  if (!topology_xml.empty()) {
    env.sysfs_root.clear();
    env.nvml_library.clear();
    env.apple_live = false;
  }
  return env;
}

void AddAccelerators(const NodeAccelerators& found, v1::NodeInfo* info) {
  info->clear_accelerators();
  for (const auto& a : found.accelerators) *info->add_accelerators() = a;
  for (const auto& [k, v] : found.allocatable) (*info->mutable_allocatable())[k] = v;
  for (const auto& [k, v] : found.labels) {
    (*info->mutable_discovered_labels())[k] = v;
    info->mutable_labels()->insert({k, v});  // an operator's label of the same key wins
  }
}

}  // namespace trainlet::agent

namespace trainlet::agent {

std::vector<RankBinding> BindingsForPlan(const v1::LaunchPlan& plan, const v1::NodeInfo& node) {
  if (plan.binding() == "none") return {};
  uint32_t local_ranks = 0;
  for (const auto& w : plan.workers()) local_ranks = std::max(local_ranks, w.local_rank() + 1);
  return ComputeRankBindings(node.topology(),
                             {node.accelerators().begin(), node.accelerators().end()}, local_ranks);
}

}  // namespace trainlet::agent
