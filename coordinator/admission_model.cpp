#include "coordinator/admission_model.h"

#include <algorithm>

namespace trainlet::coordinator::admission {
namespace {

int Intern(std::unordered_map<std::string, int>& index, std::vector<std::string>& names,
           const std::string& name) {
  auto [it, inserted] = index.try_emplace(name, static_cast<int>(names.size()));
  if (inserted) names.push_back(name);
  return it->second;
}

// The index the last name looked up got, reused while the next name is the same: thousands of
// workloads name the same few resources, flavors and ClusterQueues, and comparing with the last
// name is cheaper than hashing each. `find` maps a name to its index.
class LastLookup {
 public:
  template <typename Find>
  int operator()(const std::string& name, Find find) {
    if (last_ == nullptr || *last_ != name) {
      index_ = find(name);
      last_ = &name;
    }
    return index_;
  }

 private:
  const std::string* last_ = nullptr;
  int index_ = -1;
};

void InternNames(const AdmissionInputs& inputs, AdmissionModel& m) {
  Catalog& c = m.catalog;
  for (const ResourceFlavor& f : inputs.flavors) {
    const int i = Intern(m.flavor_index, c.flavor_names, f.name);
    c.flavor_labels.resize(c.flavor_names.size());
    c.flavor_declared.resize(c.flavor_names.size(), false);
    c.flavor_taints.resize(c.flavor_names.size());
    c.flavor_tolerations.resize(c.flavor_names.size());
    if (!c.flavor_declared[i]) {
      c.flavor_labels[i] = f.node_labels;
      for (const Taint& t : f.node_taints)
        if (t.effect == "NoSchedule" || t.effect == "NoExecute") c.flavor_taints[i].push_back(t);
      c.flavor_tolerations[i] = f.tolerations;
    }
    c.flavor_declared[i] = true;
  }
  for (const ClusterQueue& q : inputs.cluster_queues) {
    for (const ResourceGroup& g : q.resource_groups) {
      for (const std::string& r : g.covered_resources)
        Intern(m.resource_index, c.resource_names, r);
      for (const FlavorQuotas& f : g.flavors) {
        Intern(m.flavor_index, c.flavor_names, f.flavor);
        for (const ResourceQuota& r : f.resources)
          Intern(m.resource_index, c.resource_names, r.resource);
      }
    }
  }
  LastLookup resource, flavor;
  auto intern_resource = [&](const std::string& r) {
    return Intern(m.resource_index, c.resource_names, r);
  };
  auto intern_flavor = [&](const std::string& f) {
    return Intern(m.flavor_index, c.flavor_names, f);
  };
  for (const Workload& w : inputs.workloads) {
    for (const auto& [r, amount] : w.per_pod)
      if (amount != 0) resource(r, intern_resource);
    if (!w.admission) continue;
    for (const ResourceAssignment& a : w.admission->resources) {
      resource(a.resource, intern_resource);
      flavor(a.flavor, intern_flavor);
    }
  }
  c.flavor_labels.resize(c.flavor_names.size());
  c.flavor_declared.resize(c.flavor_names.size(), false);
  const int slots = static_cast<int>(c.flavor_names.size()) * c.resources();
  c.resource_of_slot.resize(slots);
  c.slot_names.resize(slots);
  for (int f = 0; f < static_cast<int>(c.flavor_names.size()); ++f) {
    for (int r = 0; r < c.resources(); ++r) {
      c.resource_of_slot[c.Slot(f, r)] = r;
      c.slot_names[c.Slot(f, r)] = c.resource_names[r] + " in flavor " + c.flavor_names[f];
    }
  }
}

// A set limit below 0 (the parser refuses those) counts as 0, never as unset.
int64_t Limit(const std::optional<int64_t>& limit) {
  return limit ? std::max<int64_t>(0, *limit) : -1;
}

void AddQueue(const ClusterQueue& q, AdmissionModel& m,
              std::unordered_map<std::string, int>& cohort_index) {
  int cohort = -1;
  if (!q.cohort.empty()) {
    auto [it, inserted] = cohort_index.try_emplace(q.cohort, 0);
    if (inserted) {
      it->second = m.ledger.AddCohort();
      m.cohort_members.emplace_back();
    }
    cohort = it->second;
  }
  const int cq = m.ledger.AddClusterQueue(cohort);
  if (cohort >= 0) m.cohort_members[cohort].push_back(cq);
  m.cq_index.emplace(q.name, cq);
  m.cq_names.push_back(q.name);
  m.specs.push_back(&q);
  QueueModel model;
  model.spec = &q;
  model.group_of_resource.assign(m.catalog.resources(), -1);
  for (const ResourceGroup& g : q.resource_groups) {
    QueueModel::Group group;
    const int gi = static_cast<int>(model.groups.size());
    auto cover = [&](const std::string& name) {
      const int r = m.ResourceOf(name);
      if (model.group_of_resource[r] >= 0) return;
      model.group_of_resource[r] = gi;
      group.resources.push_back(r);
    };
    for (const std::string& r : g.covered_resources) cover(r);
    for (const FlavorQuotas& f : g.flavors) {
      const int fi = m.FlavorOf(f.flavor);
      group.flavors.push_back(fi);
      if (!m.catalog.flavor_declared[fi] && model.inactive.empty())
        model.inactive =
            "ClusterQueue " + q.name + " is inactive: ResourceFlavor " + f.flavor + " not found";
      for (const ResourceQuota& r : f.resources) {
        if (g.covered_resources.empty()) cover(r.resource);
        m.ledger.SetQuota(
            cq, m.catalog.Slot(fi, m.ResourceOf(r.resource)),
            MakeSlotQuota(r.nominal, Limit(r.borrowing_limit), Limit(r.lending_limit)));
      }
    }
    model.groups.push_back(std::move(group));
  }
  if (q.terminating) {
    model.inactive = "ClusterQueue " + q.name + " is terminating: it admits no new job";
  }
  m.queues.push_back(std::move(model));
}

void ChargeAdmitted(const AdmissionInputs& inputs, AdmissionModel& m) {
  m.admitted_by_cq.assign(m.queues.size(), {});
  LastLookup queue, flavor, resource;
  auto queue_of = [&](const std::string& n) { return m.QueueOf(n); };
  auto flavor_of = [&](const std::string& n) { return m.FlavorOf(n); };
  auto resource_of = [&](const std::string& n) { return m.ResourceOf(n); };
  for (size_t i = 0; i < inputs.workloads.size(); ++i) {
    const Workload& w = inputs.workloads[i];
    if (!w.admission || w.admission->unmanaged) continue;
    const int cq = queue(w.admission->cluster_queue, queue_of);
    if (cq < 0) continue;
    AdmittedWorkload a;
    a.workload = static_cast<int>(i);
    a.cq = cq;
    a.priority = w.priority;
    a.creation_ms = w.creation_ms;
    a.admitted_ms = w.admitted_ms;
    a.key = &w.key;
    for (const ResourceAssignment& ra : w.admission->resources) {
      if (ra.amount == 0) continue;
      const int slot =
          m.catalog.Slot(flavor(ra.flavor, flavor_of), resource(ra.resource, resource_of));
      m.ledger.AddUsed(cq, slot, ra.amount);
      a.usage.push_back({slot, ra.amount});
    }
    m.admitted_by_cq[cq].push_back(static_cast<int>(m.admitted.size()));
    m.admitted.push_back(std::move(a));
  }
}

}  // namespace

int AdmissionModel::ResourceOf(const std::string& name) const {
  auto it = resource_index.find(name);
  return it == resource_index.end() ? -1 : it->second;
}
int AdmissionModel::FlavorOf(const std::string& name) const {
  auto it = flavor_index.find(name);
  return it == flavor_index.end() ? -1 : it->second;
}
int AdmissionModel::QueueOf(const std::string& name) const {
  auto it = cq_index.find(name);
  return it == cq_index.end() ? -1 : it->second;
}

AdmissionModel BuildAdmissionModel(const AdmissionInputs& inputs) {
  AdmissionModel m;
  InternNames(inputs, m);
  m.ledger = QuotaLedger(static_cast<int>(m.catalog.flavor_names.size()) * m.catalog.resources());
  std::unordered_map<std::string, int> cohort_index;
  for (const ClusterQueue& q : inputs.cluster_queues) {
    if (m.cq_index.count(q.name)) continue;
    AddQueue(q, m, cohort_index);
  }
  ChargeAdmitted(inputs, m);
  return m;
}

}  // namespace trainlet::coordinator::admission
