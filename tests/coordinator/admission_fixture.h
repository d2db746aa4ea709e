// Small builders for queue admission tests: GPU ClusterQueues, their LocalQueues, workloads.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "coordinator/queue_admission.h"

namespace trainlet::coordinator::admission::fixture {

inline constexpr char kGpu[] = "nvidia.com/gpu";

// A ClusterQueue with one resource group: nvidia.com/gpu in flavor "default", and a LocalQueue
// "<name>/q" in namespace <name> (add it with AddQueue).
inline ClusterQueue GpuQueue(const std::string& name, int64_t nominal,
                             const std::string& cohort = "",
                             std::optional<int64_t> borrowing_limit = std::nullopt,
                             std::optional<int64_t> lending_limit = std::nullopt) {
  ClusterQueue q;
  q.name = name;
  q.cohort = cohort;
  q.resource_groups.push_back(
      {{kGpu}, {{"default", {{kGpu, nominal, borrowing_limit, lending_limit}}}}});
  return q;
}

inline void AddQueue(AdmissionInputs& in, ClusterQueue q) {
  in.local_queues.push_back({q.name, "q", q.name});
  in.cluster_queues.push_back(std::move(q));
}

inline AdmissionInputs WithDefaultFlavor() {
  AdmissionInputs in;
  in.flavors.push_back({"default", {}});
  return in;
}

// A workload in namespace `ns`, LocalQueue "q": pods x gpus.
inline Workload Job(const std::string& ns, const std::string& name, int64_t gpus_per_pod,
                    int64_t pods = 1, int32_t priority = 0, int64_t created = 0) {
  Workload w;
  w.namespace_ = ns;
  w.key = ns == "default" ? name : ns + "." + name;
  w.local_queue = "q";
  w.priority = priority;
  w.creation_ms = created;
  w.pod_count = pods;
  if (gpus_per_pod) w.per_pod[kGpu] = gpus_per_pod;
  return w;
}

// The same workload, admitted to its namespace's ClusterQueue (named as the namespace) in
// flavor "default" at `admitted_ms`.
inline Workload Running(Workload w, int64_t admitted_ms = 0, const std::string& cq = "") {
  Admission a;
  a.cluster_queue = cq.empty() ? w.namespace_ : cq;
  for (const auto& [r, per_pod] : w.per_pod)
    a.resources.push_back({r, "default", per_pod * w.pod_count});
  w.admission = a;
  w.admitted_ms = admitted_ms;
  return w;
}

inline const Admission* FindAdmitted(const AdmissionResult& r, const std::string& key) {
  for (const auto& [k, a] : r.admitted)
    if (k == key) return &a;
  return nullptr;
}

inline const PendingWorkload* FindPending(const AdmissionResult& r, const std::string& key) {
  for (const PendingWorkload& p : r.pending)
    if (p.key == key) return &p;
  return nullptr;
}

inline std::vector<std::string> Victims(const AdmissionResult& r) {
  std::vector<std::string> out;
  for (const Preemption& p : r.preemptions) out.push_back(p.victim);
  return out;
}

}  // namespace trainlet::coordinator::admission::fixture
