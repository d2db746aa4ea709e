#include "agent/rank_binding.h"

#include <algorithm>
#include <set>

#include "agent/cpu_allotment.h"
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

// The splittable accelerators of the vendor with the most of them, by index; `vendor` is set to
// that vendor.
std::vector<const v1::Accelerator*> SplittableGpus(const std::vector<v1::Accelerator>& accelerators,
                                                   std::string& vendor) {
  std::map<std::string, std::vector<const v1::Accelerator*>> by_vendor;
  std::vector<std::string> vendor_order;
  for (const v1::Accelerator& a : accelerators) {
    if (a.pci_bus_id().empty()) continue;  // an Apple SoC: one GPU for the whole machine
    if (!by_vendor.contains(a.vendor())) vendor_order.push_back(a.vendor());
    by_vendor[a.vendor()].push_back(&a);
  }
  std::vector<const v1::Accelerator*> gpus;
  for (const std::string& v : vendor_order) {
    if (by_vendor[v].size() > gpus.size()) {
      gpus = by_vendor[v];
      vendor = v;
    }
  }
  std::sort(gpus.begin(), gpus.end(),
            [](const auto* a, const auto* b) { return a->index() < b->index(); });
  return gpus;
}

// The PUs of each NUMA node that has CPUs, by OS index.
std::map<uint32_t, std::vector<unsigned>> NumaPus(const v1::Topology& topology) {
  std::map<uint32_t, std::vector<unsigned>> numa_pus;
  for (const v1::NumaNode& n : topology.numa_nodes()) {
    auto pus = Cpus(n.cpuset());
    if (!pus.empty()) numa_pus[n.os_index()] = std::move(pus);
  }
  return numa_pus;
}

// What the ranks are placed on: the GPUs and the NUMA nodes that have CPUs.
struct Machine {
  std::vector<const v1::Accelerator*> gpus;
  std::string vendor;
  std::map<uint32_t, std::vector<unsigned>> numa_pus;
  std::vector<uint32_t> numa_ids;  // the keys of numa_pus, in order
};

// Gives rank `r` of `l` its devices and returns its home as a key ("" for none): the NUMA nodes of
// its GPUs (or, without GPUs, its share of the NUMA nodes), or the local cpusets of GPUs whose
// NUMA node is unknown. `home_pus` gets the home's PUs.
std::string AssignHome(const Machine& m, size_t r, size_t l, RankBinding& b,
                       std::vector<unsigned>& home_pus) {
  std::set<uint32_t> nodes;
  std::set<unsigned> fallback;  // local cpusets of GPUs without a known NUMA node
  const size_t g = m.gpus.size();
  if (g > 0) {
    b.vendor = m.vendor;
    const size_t lo = r * g / l;
    const size_t hi = l <= g ? (r + 1) * g / l : lo + 1;
    for (size_t i = lo; i < hi; ++i) {
      b.devices.push_back(m.gpus[i]->index());
      if (m.gpus[i]->numa_node() >= 0 && m.numa_pus.contains(m.gpus[i]->numa_node())) {
        nodes.insert(static_cast<uint32_t>(m.gpus[i]->numa_node()));
      } else {
        for (unsigned c : Cpus(m.gpus[i]->local_cpuset())) fallback.insert(c);
      }
    }
  } else if (!m.numa_ids.empty()) {
    const size_t n = m.numa_ids.size();
    const size_t lo = r * n / l;
    const size_t hi = std::max(lo + 1, (r + 1) * n / l);
    for (size_t i = lo; i < hi; ++i) nodes.insert(m.numa_ids[i]);
  }
  std::string key;
  std::set<unsigned> pus(fallback);
  for (uint32_t id : nodes) {
    key += "numa" + std::to_string(id) + ";";
    const auto& node_pus = m.numa_pus.at(id);
    pus.insert(node_pus.begin(), node_pus.end());
  }
  if (nodes.empty() && !fallback.empty()) {
    key = "cpus" + FormatCpuList({fallback.begin(), fallback.end()});
  }
  home_pus.assign(pus.begin(), pus.end());
  return key;
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

  Machine m;
  m.gpus = SplittableGpus(accelerators, m.vendor);
  m.numa_pus = NumaPus(topology);
  for (const auto& [id, pus] : m.numa_pus) m.numa_ids.push_back(id);

  // Each rank's home, as a key, and the PUs of each home.
  std::vector<std::string> home(local_ranks);
  std::map<std::string, std::vector<unsigned>> home_pus;
  const size_t l = local_ranks;
  for (size_t r = 0; r < l; ++r) {
    std::vector<unsigned> pus;
    home[r] = AssignHome(m, r, l, out[r], pus);
    if (!home[r].empty()) home_pus[home[r]] = std::move(pus);
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
  return CpusAvailableIn(platform::ThisThreadCpus(), cpus);
}

bool CpusAvailableIn(const std::vector<unsigned>& available, const std::vector<unsigned>& cpus) {
  return std::all_of(cpus.begin(), cpus.end(), [&](unsigned c) {
    return std::binary_search(available.begin(), available.end(), c);
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

std::vector<RankBinding> BindingsForPlan(const v1::LaunchPlan& plan, const v1::NodeInfo& node,
                                         const std::vector<unsigned>* grant) {
  if (plan.binding() == "none") return {};
  uint32_t local_ranks = 0;
  for (const auto& w : plan.workers()) {
    // A replicated job's workers (WorkerSpec.step) are unbound: they do not share the devices.
    if (w.step().empty()) local_ranks = std::max(local_ranks, w.local_rank() + 1);
  }
  const std::vector<v1::Accelerator> accelerators(node.accelerators().begin(),
                                                  node.accelerators().end());
  if (grant == nullptr || grant->empty()) {
    return ComputeRankBindings(node.topology(), accelerators, local_ranks);
  }
  return ComputeRankBindings(RestrictTopology(node.topology(), *grant),
                             RestrictAccelerators(accelerators, *grant), local_ranks);
}

}  // namespace trainlet::agent
