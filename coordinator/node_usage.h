// NodeUsage: what the jobs hold on each node at one moment, read from their entries.
//
// A rank that has not ended (lifecycle_rules.h, RankEnded) holds one slot on its node and its
// job's resourcesPerNode there, whatever its job's phase: the ranks of a Failed or Restarting
// attempt keep running until their stop takes effect. The planner is given the slots and
// resources (placement_inputs.h); `trainletctl nodes` and drain show which jobs still run where;
// the coordinator's restart check looks at the nodes of live attempts.
//
// UsageOf is a pure function of the entries it is given; a NodeUsage is a value, stale as soon as
// a job changes. Any thread.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "coordinator/job_entry.h"
#include "coordinator/resources.h"

namespace trainlet::coordinator {

struct NodeUsage {
  std::map<std::string, uint32_t> slots;       // by node: ranks that have not ended
  std::map<std::string, Resources> resources;  // by node: resourcesPerNode of each job there
  // By node: the jobs with a rank there that has not ended, in the order UsageOf was given them.
  std::map<std::string, std::vector<std::string>> jobs;
  // Nodes holding a rank that has not ended of a job's current attempt while it is Starting or
  // Running and not being deleted (AttemptActive, exec_authority.h).
  std::set<std::string> placed;

  // The jobs with a live rank on `node` (empty for none).
  std::vector<std::string> JobsOn(const std::string& node) const;
  // How many ranks that have not ended `node` holds.
  uint32_t LiveRanks(const std::string& node) const;
};

// What `jobs` (in creation order) hold on each node.
NodeUsage UsageOf(const std::vector<const JobEntry*>& jobs);

}  // namespace trainlet::coordinator
