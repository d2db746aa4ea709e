#include "coordinator/admission_usage.h"

#include <algorithm>
#include <string_view>
#include <unordered_map>

namespace trainlet::coordinator::admission {

std::vector<ClusterQueueUsage> UsageByClusterQueue(const AdmissionInputs& state) {
  std::vector<ClusterQueueUsage> out;
  std::unordered_map<std::string_view, size_t> index;  // views into `state`
  for (const ClusterQueue& q : state.cluster_queues) {
    if (!index.emplace(q.name, out.size()).second) continue;  // the first definition counts
    ClusterQueueUsage u;
    u.name = q.name;
    u.cohort = q.cohort;
    for (const ResourceGroup& g : q.resource_groups)
      for (const FlavorQuotas& f : g.flavors)
        for (const ResourceQuota& r : f.resources)
          u.usage.push_back({f.flavor, r.resource, r.nominal, r.borrowing_limit, r.lending_limit});
    out.push_back(std::move(u));
  }
  // namespace -> LocalQueue name -> its ClusterQueue; the first definition counts. Views into
  // `state`: looking a workload's queue up builds no string.
  std::unordered_map<std::string_view, std::unordered_map<std::string_view, std::string_view>>
      local;
  for (const LocalQueue& q : state.local_queues)
    local[q.namespace_].emplace(q.name, q.cluster_queue);
  for (const Workload& w : state.workloads) {
    if (w.admission) {
      auto it = index.find(w.admission->cluster_queue);
      if (w.admission->unmanaged || it == index.end()) continue;
      ClusterQueueUsage& u = out[it->second];
      ++u.admitted;
      for (const ResourceAssignment& a : w.admission->resources)
        for (FlavorResourceUsage& fr : u.usage)
          if (fr.flavor == a.flavor && fr.resource == a.resource) fr.used += a.amount;
      continue;
    }
    const std::string& lq =
        w.local_queue.empty() ? state.config.default_local_queue : w.local_queue;
    if (lq.empty()) continue;
    auto ns = local.find(w.namespace_);
    if (ns == local.end()) continue;
    auto l = ns->second.find(lq);
    if (l == ns->second.end()) continue;
    auto it = index.find(l->second);
    if (it != index.end()) ++out[it->second].pending;
  }
  for (ClusterQueueUsage& u : out)
    for (FlavorResourceUsage& fr : u.usage)
      fr.borrowed = std::max<int64_t>(0, fr.used - fr.nominal);
  return out;
}

std::map<std::string, std::map<std::string, int64_t>> CurrentUsage(
    const std::vector<ClusterQueueUsage>& usage) {
  std::map<std::string, std::map<std::string, int64_t>> out;
  for (const ClusterQueueUsage& u : usage) {
    auto& by_resource = out[u.name];
    for (const FlavorResourceUsage& fr : u.usage) by_resource[fr.resource] += fr.used;
  }
  return out;
}

}  // namespace trainlet::coordinator::admission
