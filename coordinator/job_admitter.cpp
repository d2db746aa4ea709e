#include "coordinator/job_admitter.h"

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <utility>

#include "coordinator/admission_order.h"
#include "coordinator/job_key.h"
#include "coordinator/job_state_machine.h"
#include "coordinator/lifecycle_rules.h"
#include "coordinator/queue_admission.h"
#include "coordinator/rank_state_machine.h"
#include "coordinator/resources.h"

namespace trainlet::coordinator {
namespace {

bool AllRanksEnded(const v1::JobStatus& st) {
  return std::all_of(st.ranks().begin(), st.ranks().end(), RankEnded);
}

admission::LabelSelector SelectorOf(const kueue::LabelSelector& in) {
  admission::LabelSelector out;
  out.match_labels = in.match_labels;
  for (const auto& r : in.match_expressions) {
    admission::LabelRequirement req;
    req.key = r.key;
    req.values = r.values;
    if (r.op == "NotIn") {
      req.op = admission::LabelRequirement::Op::kNotIn;
    } else if (r.op == "Exists") {
      req.op = admission::LabelRequirement::Op::kExists;
    } else if (r.op == "DoesNotExist") {
      req.op = admission::LabelRequirement::Op::kDoesNotExist;
    }
    out.match_expressions.push_back(std::move(req));
  }
  return out;
}

admission::PreemptionPolicy PolicyOf(const kueue::Preemption& in) {
  using P = kueue::Preemption;
  admission::PreemptionPolicy out;
  switch (in.within_cluster_queue) {
    case P::WithinClusterQueue::kNever:
      out.within_cluster_queue = admission::WithinClusterQueuePolicy::kNever;
      break;
    case P::WithinClusterQueue::kLowerPriority:
      out.within_cluster_queue = admission::WithinClusterQueuePolicy::kLowerPriority;
      break;
    case P::WithinClusterQueue::kLowerOrNewerEqualPriority:
      out.within_cluster_queue = admission::WithinClusterQueuePolicy::kLowerOrNewerEqualPriority;
      break;
  }
  switch (in.reclaim_within_cohort) {
    case P::ReclaimWithinCohort::kNever:
      out.reclaim_within_cohort = admission::ReclaimWithinCohortPolicy::kNever;
      break;
    case P::ReclaimWithinCohort::kLowerPriority:
      out.reclaim_within_cohort = admission::ReclaimWithinCohortPolicy::kLowerPriority;
      break;
    case P::ReclaimWithinCohort::kAny:
      out.reclaim_within_cohort = admission::ReclaimWithinCohortPolicy::kAny;
      break;
  }
  out.borrow_within_cohort = in.borrow_within_cohort == P::BorrowWithinCohort::kLowerPriority
                                 ? admission::BorrowWithinCohortPolicy::kLowerPriority
                                 : admission::BorrowWithinCohortPolicy::kNever;
  out.max_priority_threshold = in.borrow_max_priority_threshold;
  return out;
}

admission::ClusterQueue ClusterQueueOf(const kueue::ClusterQueue& in) {
  admission::ClusterQueue out;
  out.name = in.name;
  out.cohort = in.cohort;
  if (in.namespace_selector) {
    out.namespace_selector = SelectorOf(*in.namespace_selector);
  } else {
    out.namespace_selector.reset();
  }
  out.strategy = in.queueing_strategy == kueue::QueueingStrategy::kStrictFifo
                     ? admission::QueueingStrategy::kStrictFifo
                     : admission::QueueingStrategy::kBestEffortFifo;
  for (const auto& group : in.resource_groups) {
    admission::ResourceGroup g;
    g.covered_resources = group.covered_resources;
    for (const auto& flavor : group.flavors) {
      admission::FlavorQuotas f;
      f.flavor = flavor.name;
      for (const auto& r : flavor.resources) {
        admission::ResourceQuota q;
        q.resource = r.name;
        q.nominal = r.nominal.units;
        if (r.borrowing_limit) q.borrowing_limit = r.borrowing_limit->units;
        if (r.lending_limit) q.lending_limit = r.lending_limit->units;
        f.resources.push_back(std::move(q));
      }
      g.flavors.push_back(std::move(f));
    }
    out.resource_groups.push_back(std::move(g));
  }
  out.preemption = PolicyOf(in.preemption);
  out.fair_weight = static_cast<double>(in.fair_sharing_weight_milli) / 1000.0;
  using F = kueue::FlavorFungibility;
  out.fungibility.try_next_when_can_borrow =
      in.flavor_fungibility.when_can_borrow == F::WhenCanBorrow::kTryNextFlavor;
  out.fungibility.try_next_when_can_preempt =
      in.flavor_fungibility.when_can_preempt == F::WhenCanPreempt::kTryNextFlavor;
  return out;
}

admission::ResourceFlavor FlavorOf(const kueue::ResourceFlavor& in) {
  admission::ResourceFlavor out{in.name, in.node_labels, {}, {}};
  for (const auto& t : in.node_taints) out.node_taints.push_back({t.key, t.value, t.effect});
  for (const auto& t : in.tolerations) out.tolerations.push_back({t.key, t.op, t.value, t.effect});
  return out;
}

}  // namespace

const char* WaitKindName(admission::WaitKind kind) {
  switch (kind) {
    case admission::WaitKind::kNoLocalQueue:
      return "NoLocalQueue";
    case admission::WaitKind::kNoClusterQueue:
      return "NoClusterQueue";
    case admission::WaitKind::kClusterQueueTerminating:
      return "ClusterQueueTerminating";
    case admission::WaitKind::kNamespaceNotSelected:
      return "NamespaceNotSelected";
    case admission::WaitKind::kNeverFits:
      return "NeverFits";
    case admission::WaitKind::kQuota:
      return "Quota";
    case admission::WaitKind::kPreempting:
      return "Preempting";
    case admission::WaitKind::kBlocked:
      return "Blocked";
  }
  return "Quota";
}

bool JobAdmitter::HoldsQuota(const v1::JobStatus& st) {
  if (!st.has_admission()) return false;
  const JobPhase phase = PhaseOf(st);
  const bool let_go = IsTerminal(phase) || phase == JobPhase::kSuspended || st.deleting();
  return !(let_go && AllRanksEnded(st));
}

bool JobAdmitter::Queued(const JobEntry& job) {
  const v1::JobStatus& st = job.record.status;
  if (st.has_admission() || st.deleting() || job.plugin == nullptr) return false;
  const JobPhase phase = PhaseOf(st);
  if (phase == JobPhase::kPending) return true;
  return phase == JobPhase::kSuspended && st.reason() == kReasonPreempted && AllRanksEnded(st);
}

std::vector<std::string> JobAdmitter::PendingChecks(const v1::JobStatus& st) const {
  std::vector<std::string> out;
  if (!st.has_admission() || st.admission().unmanaged() || !AnyAdmissionChecks()) return out;
  const kueue::ClusterQueue* cq = catalog_->FindClusterQueue(st.admission().cluster_queue());
  if (cq == nullptr || cq->admission_checks.empty()) return out;
  const auto& ready = st.admission_checks_ready();
  for (const kueue::AdmissionCheckRef& check : cq->admission_checks) {
    if (std::find(ready.begin(), ready.end(), check.name) != ready.end()) continue;
    const bool applies =
        check.on_flavors.empty() ||
        std::any_of(st.admission().resources().begin(), st.admission().resources().end(),
                    [&](const v1::AssignedResource& r) {
                      return std::find(check.on_flavors.begin(), check.on_flavors.end(),
                                       r.flavor()) != check.on_flavors.end();
                    });
    if (applies) out.push_back(check.name);
  }
  return out;
}

bool JobAdmitter::AnyAdmissionChecks() const {
  if (checks_seen_generation_ != catalog_->generation()) {
    const auto queues = catalog_->List(kueue::Kind::kClusterQueue);
    any_checks_ = std::any_of(queues.begin(), queues.end(), [](const kueue::QueueObject* o) {
      return !o->cluster_queue->admission_checks.empty();
    });
    checks_seen_generation_ = catalog_->generation();
  }
  return any_checks_;
}

std::vector<std::string> JobAdmitter::ChecksOf(const std::string& cluster_queue) const {
  std::vector<std::string> out;
  if (const kueue::ClusterQueue* cq = catalog_->FindClusterQueue(cluster_queue)) {
    for (const auto& check : cq->admission_checks) out.push_back(check.name);
  }
  return out;
}

bool JobAdmitter::active() const {
  return !catalog_->List(kueue::Kind::kClusterQueue).empty() ||
         !catalog_->List(kueue::Kind::kLocalQueue).empty();
}

namespace {

void AssignIfDifferent(std::string& to, std::string_view from) {
  if (to != from) to.assign(from);
}

// `to` made equal to `from` (the gang's tolerations, in the engine's type), left alone when it is.
void AssignTolerations(std::vector<admission::Toleration>& to,
                       const std::vector<trainjob::Toleration>& from) {
  to.resize(from.size());
  for (size_t i = 0; i < from.size(); ++i) {
    AssignIfDifferent(to[i].key, from[i].key);
    AssignIfDifferent(to[i].op, from[i].op);
    AssignIfDifferent(to[i].value, from[i].value);
    AssignIfDifferent(to[i].effect, from[i].effect);
  }
}

// The gang's requests per pod, rebuilt only when they differ from what `per_pod` holds. The
// kinds in the order of their names, as the map keeps them: compared side by side, no lookup.
void AssignPerPod(std::map<std::string, int64_t>& per_pod, const Resources& resources) {
  static constexpr ResourceKind kByName[] = {ResourceKind::kAmdGpu, ResourceKind::kAppleGpu,
                                             ResourceKind::kCpu, ResourceKind::kMemory,
                                             ResourceKind::kNvidiaGpu};
  static_assert(std::size(kByName) == kNumResourceKinds);
  auto it = per_pod.begin();
  bool same = true;
  for (ResourceKind kind : kByName) {
    if (resources[kind] <= 0) continue;
    if (it == per_pod.end() || it->second != resources[kind] || it->first != ResourceName(kind)) {
      same = false;
      break;
    }
    ++it;
  }
  if (same && it == per_pod.end()) return;
  per_pod.clear();
  for (ResourceKind kind : kByName) {
    if (resources[kind] > 0) per_pod.emplace(std::string(ResourceName(kind)), resources[kind]);
  }
}

}  // namespace

std::optional<admission::PendingWorkload> FillWorkload(const JobEntry& job,
                                                       const QueueCatalog& catalog,
                                                       admission::Workload& w) {
  const v1::JobStatus& st = job.record.status;
  int32_t priority = 0;
  if (!job.spec.priority_class.empty()) {
    auto value = catalog.PriorityValue(job.spec.priority_class);
    // A job that holds quota keeps it even when its class was deleted since: it is counted,
    // at priority 0, so nothing is admitted into quota it still uses.
    if (!value && !st.has_admission()) {
      admission::PendingWorkload wait;
      wait.key = job.record.name;
      wait.message = "WorkloadPriorityClass " + job.spec.priority_class + " not found";
      return wait;
    }
    priority = value.value_or(0);
  }
  AssignIfDifferent(w.key, job.record.name);
  AssignIfDifferent(w.namespace_, st.namespace_().empty() ? kDefaultNamespace
                                                          : std::string_view(st.namespace_()));
  AssignIfDifferent(w.local_queue, job.spec.queue_name);
  w.priority = priority;
  w.creation_ms = st.created_unix_ms();
  AssignPerPod(w.per_pod, job.gang.resources);
  w.pod_count = std::max<int64_t>(1, st.num_nodes());
  if (w.node_selector != job.gang.node_selector) w.node_selector = job.gang.node_selector;
  AssignTolerations(w.tolerations, job.gang.tolerations);
  if (!st.has_admission() || st.admission().unmanaged()) {
    w.admission.reset();
    w.admitted_ms = 0;
    return std::nullopt;
  }
  admission::Admission& a = w.admission ? *w.admission : w.admission.emplace();
  AssignIfDifferent(a.cluster_queue, st.admission().cluster_queue());
  a.borrowing = st.admission().borrowing();
  a.unmanaged = false;
  a.resources.resize(st.admission().resources_size());
  for (int i = 0; i < st.admission().resources_size(); ++i) {
    const v1::AssignedResource& r = st.admission().resources(i);
    AssignIfDifferent(a.resources[i].resource, r.resource());
    AssignIfDifferent(a.resources[i].flavor, r.flavor());
    a.resources[i].amount = r.amount();
  }
  w.admitted_ms = st.admission().unix_ms();
  return std::nullopt;
}

void JobAdmitter::FillInputs(const std::vector<const JobEntry*>& jobs, int64_t now_ms,
                             AdmissionDecisions& out) {
  admission::AdmissionInputs& in = inputs_;
  in.flavors.clear();
  for (const auto* o : catalog_->List(kueue::Kind::kResourceFlavor)) {
    in.flavors.push_back(FlavorOf(*o->flavor));
  }
  in.cluster_queues.clear();
  for (const auto* o : catalog_->List(kueue::Kind::kClusterQueue)) {
    in.cluster_queues.push_back(ClusterQueueOf(*o->cluster_queue));
    in.cluster_queues.back().terminating = catalog_->Terminating(o->kind, o->name);
  }
  in.local_queues.clear();
  in.namespace_labels.clear();
  for (const auto* o : catalog_->List(kueue::Kind::kLocalQueue)) {
    in.local_queues.push_back(
        {o->local_queue->namespace_, o->local_queue->name, o->local_queue->cluster_queue});
    // trainlet has no Namespace objects: a namespace's labels are the one Kubernetes always
    // sets, kubernetes.io/metadata.name, so namespaceSelector matchLabels on it work.
    in.namespace_labels[o->local_queue->namespace_]["kubernetes.io/metadata.name"] =
        o->local_queue->namespace_;
  }
  // The last pass's workloads are filled again in place: their strings and maps keep their
  // storage, so a pass over 10,000 waiting jobs allocates little more than what changed.
  size_t used = 0;
  out.job_of_workload.reserve(jobs.size());
  // The last workload whose namespace was looked up (an index: adding a workload may move them).
  size_t labelled = SIZE_MAX;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const JobEntry& job = *jobs[i];
    const bool holds = HoldsQuota(job, now_ms);
    if (!holds && !Queued(job)) continue;
    if (used == in.workloads.size()) in.workloads.emplace_back();
    admission::Workload& w = in.workloads[used];
    if (auto wait = FillWorkload(job, *catalog_, w)) {
      if (!holds) {
        out.unresolved.push_back(std::move(*wait));
        out.unresolved_jobs.push_back(i);
      }
      continue;
    }
    if (labelled == SIZE_MAX || in.workloads[labelled].namespace_ != w.namespace_) {
      auto& labels = in.namespace_labels[w.namespace_];
      if (labels.empty()) labels["kubernetes.io/metadata.name"] = w.namespace_;
      labelled = used;
    }
    ++used;
    out.job_of_workload.push_back(i);
  }
  in.workloads.resize(used);
  in.history = history_;
  in.config.default_local_queue = options_.default_local_queue;
  in.config.fair_sharing = options_.fair_sharing;
  in.config.usage_half_life_ms = options_.usage_half_life_ms;
}

const AdmissionDecisions& JobAdmitter::Pass(const std::vector<const JobEntry*>& jobs,
                                            int64_t now_ms) {
  AdmissionDecisions out;
  FillInputs(jobs, now_ms, out);
  out.result = admission::RunAdmissionPass(inputs_, now_ms);
  // What get clusterqueues shows: the usage once this pass's admissions hold their quota. The
  // admissions are written into the kept inputs; the next pass fills them from the jobs again.
  admission::ApplyAdmissionResultTo(inputs_, out.result, now_ms, false);
  usage_ = admission::UsageByClusterQueue(inputs_);
  history_ = admission::AdvanceUsageHistory(history_, admission::CurrentUsage(usage_), now_ms,
                                            options_.usage_half_life_ms);
  last_ = std::move(out);
  return last_;
}

}  // namespace trainlet::coordinator
