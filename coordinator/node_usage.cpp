#include "coordinator/node_usage.h"

#include "coordinator/exec_authority.h"
#include "coordinator/lifecycle_rules.h"

namespace trainlet::coordinator {

std::vector<std::string> NodeUsage::JobsOn(const std::string& node) const {
  auto it = jobs.find(node);
  return it == jobs.end() ? std::vector<std::string>{} : it->second;
}

uint32_t NodeUsage::LiveRanks(const std::string& node) const {
  auto it = slots.find(node);
  return it == slots.end() ? 0 : it->second;
}

NodeUsage UsageOf(const std::vector<const JobEntry*>& jobs) {
  NodeUsage usage;
  for (const JobEntry* job : jobs) {
    const v1::JobStatus& st = job->record.status;
    const bool active = AttemptActive(st, st.attempt());
    std::set<std::string> nodes;  // where this job has a live rank
    for (const auto& r : st.ranks()) {
      if (RankEnded(r)) continue;
      // A replicated job's workers (an initializer) hold no slot: the gang was placed for the
      // main ranks alone, and counting them could put a node past its slots.
      if (r.step().empty()) ++usage.slots[r.node()];
      nodes.insert(r.node());
      if (active) usage.placed.insert(r.node());
    }
    for (const std::string& n : nodes) {
      usage.jobs[n].push_back(job->record.name);
      if (!job->gang.resources.empty()) usage.resources[n] += job->gang.resources;
    }
  }
  return usage;
}

}  // namespace trainlet::coordinator
