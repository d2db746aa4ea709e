// The interned form of AdmissionInputs that one admission pass works on: names turned into
// dense indices (admission_flavors.h's Catalog and QueueModel), the quota ledger filled with
// every ClusterQueue's quota and every admitted workload's usage. Built once per pass and
// owned by it; not thread-safe.
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "coordinator/admission_flavors.h"
#include "coordinator/admission_preemption.h"
#include "coordinator/admission_quota.h"
#include "coordinator/admission_types.h"

namespace trainlet::coordinator::admission {

struct AdmissionModel {
  Catalog catalog;
  std::vector<QueueModel> queues;          // by cq index
  std::vector<const ClusterQueue*> specs;  // by cq index
  std::vector<std::string> cq_names;
  std::unordered_map<std::string, int> cq_index;
  std::vector<std::vector<int>> cohort_members;  // cq indices by cohort index
  QuotaLedger ledger{0};
  std::unordered_map<std::string, int> resource_index, flavor_index;
  // Admitted workloads charged to a ClusterQueue, and their indices by ClusterQueue.
  std::vector<AdmittedWorkload> admitted;
  std::vector<std::vector<int>> admitted_by_cq;

  int ResourceOf(const std::string& name) const;  // -1 when unknown
  int FlavorOf(const std::string& name) const;    // -1 when unknown
  int QueueOf(const std::string& name) const;     // -1 when unknown
};

// Interns every name in `inputs` and charges every managed admission to its ClusterQueue.
// An admission naming a ClusterQueue that does not exist is charged nowhere; a ClusterQueue
// named twice keeps its first definition.
AdmissionModel BuildAdmissionModel(const AdmissionInputs& inputs);

}  // namespace trainlet::coordinator::admission
