#include "coordinator/queue_admission.h"

#include <algorithm>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "coordinator/admission_model.h"
#include "coordinator/admission_order.h"
#include "coordinator/admission_reasons.h"

namespace trainlet::coordinator::admission {
namespace {

// One pass over the inputs. Members are filled in the order of Run's steps; every method is
// one step of the pass.
class AdmissionPass {
 public:
  AdmissionPass(const AdmissionInputs& inputs, int64_t now_ms)
      : in_(inputs), now_ms_(now_ms), m_(BuildAdmissionModel(inputs)) {}

  AdmissionResult Run();

 private:
  // The cached evaluation of a ClusterQueue's head.
  struct Head {
    std::vector<int> order;  // pending workloads (indices into in_.workloads), queue order
    size_t cursor = 0;
    bool done = false;
    bool evaluated = false;
    uint64_t version = 0;
    Assignment assignment;
    HeadKey key;
  };

  // Where a LocalQueue of a namespace leads.
  struct Route {
    bool ok = false;
    int cq = -1;
    WaitKind kind = WaitKind::kNoLocalQueue;
    std::string message;
  };
  Route RouteOf(const std::string& ns, const std::string& lq) const;
  void Resolve();
  bool DemandOf(const Workload& w, std::string& why);
  Demand DemandOf(int w) const {
    return Demand(demand_pool_).subspan(demand_span_[w].first, demand_span_[w].second);
  }
  void ComputeHistoryShares();
  void Evaluate(int cq);
  int PickHead(const std::vector<int>& queues);
  void Process(int cq);
  void Admit(int cq, int w, const Assignment& a);
  bool TryPreempt(int cq, int w, const Assignment& a);
  std::string QuotaMessage(int cq, const Assignment& a);
  std::string BuildQuotaMessage(int cq, const Assignment& a) const;
  void BlockBehind(int cq, int w);
  void Wait(int w, int cq, WaitKind kind, std::string message);
  void Positions();

  const AdmissionInputs& in_;
  const int64_t now_ms_;
  AdmissionModel m_;
  std::vector<Head> heads_;
  std::unordered_map<std::string, const LocalQueue*> local_;  // "<namespace>/<name>"
  // Pending workloads' total requests, one flat pool; by workload: (offset, count) in it.
  std::vector<std::pair<int, int64_t>> demand_pool_;
  std::vector<std::pair<size_t, size_t>> demand_span_;
  std::vector<double> history_share_;
  std::vector<int> pending_slot_;               // by workload: index into result_.pending, or -1
  std::vector<std::pair<int, int64_t>> extra_;  // scratch of Evaluate
  // Quota wait messages by ClusterQueue, (slot, need), valid at one ledger version: the
  // pending behind a full queue mostly ask the same few amounts.
  struct MessageCache {
    uint64_t version = ~uint64_t{0};
    std::map<std::pair<int, int64_t>, std::string> messages;
  };
  std::vector<MessageCache> messages_;
  // Preemption searches that found no victims, by ClusterQueue, valid at one ledger version
  // (victims are only chosen together with a version change). The same priority and demand
  // find none again; the creation time matters only under LowerOrNewerEqualPriority.
  struct FailedSearches {
    uint64_t version = ~uint64_t{0};
    std::set<std::tuple<int32_t, int64_t, std::vector<std::tuple<int, int64_t, int>>>> keys;
  };
  std::vector<FailedSearches> failed_;
  AdmissionResult result_;
};

// 16 bytes of `key` from `from`, big-endian in two words, zero past its end. For keys that agree
// before `from`, comparing the words orders them as std::string does, except keys equal in those
// 16 bytes, which must then be compared whole.
std::pair<uint64_t, uint64_t> NameBytes(std::string_view key, size_t from) {
  uint64_t word[2] = {0, 0};
  for (size_t i = 0; i < 16 && from + i < key.size(); ++i) {
    word[i / 8] |= uint64_t{static_cast<unsigned char>(key[from + i])} << (56 - 8 * (i % 8));
  }
  return {word[0], word[1]};
}

void AdmissionPass::Wait(int w, int cq, WaitKind kind, std::string message) {
  pending_slot_[w] = static_cast<int>(result_.pending.size());
  result_.pending.push_back(
      {in_.workloads[w].key, cq >= 0 ? m_.cq_names[cq] : "", kind, std::move(message), 0, w});
}

// Appends w's total requests to the pool; false (and why) when they are not valid.
bool AdmissionPass::DemandOf(const Workload& w, std::string& why) {
  if (w.pod_count < 1) {
    why = "can never fit: pod count " + std::to_string(w.pod_count) + " is not positive";
    return false;
  }
  for (const auto& [name, per_pod] : w.per_pod) {
    if (per_pod == 0) continue;
    int64_t total = 0;
    if (per_pod < 0 || __builtin_mul_overflow(per_pod, w.pod_count, &total)) {
      why = "can never fit: request of " + name + " is negative or too large";
      return false;
    }
    demand_pool_.push_back({m_.ResourceOf(name), total});
  }
  return true;
}

// Where a LocalQueue leads: its ClusterQueue, or why it leads nowhere.
AdmissionPass::Route AdmissionPass::RouteOf(const std::string& ns, const std::string& lq) const {
  static const std::map<std::string, std::string> kNoLabels;
  Route route;
  auto it = local_.find(ns + "/" + lq);
  if (it == local_.end()) {
    route.kind = WaitKind::kNoLocalQueue;
    route.message = "LocalQueue " + ns + "/" + lq + " does not exist";
    return route;
  }
  route.cq = m_.QueueOf(it->second->cluster_queue);
  if (route.cq < 0) {
    route.kind = WaitKind::kNoClusterQueue;
    route.message = "ClusterQueue " + it->second->cluster_queue + " not found";
    return route;
  }
  if (!m_.queues[route.cq].inactive.empty()) {
    route.kind = m_.specs[route.cq]->terminating ? WaitKind::kClusterQueueTerminating
                                                 : WaitKind::kNoClusterQueue;
    route.message = m_.queues[route.cq].inactive;
    return route;
  }
  const auto& selector = m_.specs[route.cq]->namespace_selector;
  auto labels = in_.namespace_labels.find(ns);
  if (!selector ||
      !SelectorMatches(*selector,
                       labels == in_.namespace_labels.end() ? kNoLabels : labels->second)) {
    route.kind = WaitKind::kNamespaceNotSelected;
    route.message = "namespace " + ns + " is not selected by ClusterQueue " + m_.cq_names[route.cq];
    return route;
  }
  route.ok = true;
  return route;
}

// Every pending workload to its ClusterQueue's list, or to its wait reason.
void AdmissionPass::Resolve() {
  for (const LocalQueue& q : in_.local_queues) local_.emplace(q.namespace_ + "/" + q.name, &q);
  // Routes by namespace, then LocalQueue name: computed once for each pair seen.
  std::unordered_map<std::string, std::unordered_map<std::string, Route>> routes;
  for (size_t i = 0; i < in_.workloads.size(); ++i) {
    const Workload& w = in_.workloads[i];
    if (w.admission) continue;
    const int wi = static_cast<int>(i);
    const std::string& lq = w.local_queue.empty() ? in_.config.default_local_queue : w.local_queue;
    if (lq.empty()) {
      result_.admitted.push_back({w.key, Admission{"", {}, false, true}});
      continue;
    }
    auto& by_name = routes[w.namespace_];
    auto it = by_name.find(lq);
    if (it == by_name.end()) it = by_name.emplace(lq, RouteOf(w.namespace_, lq)).first;
    const Route& route = it->second;
    if (!route.ok) {
      Wait(wi, route.cq, route.kind, route.message);
      continue;
    }
    std::string why;
    const size_t start = demand_pool_.size();
    if (!DemandOf(w, why)) {
      demand_pool_.resize(start);
      Wait(wi, route.cq, WaitKind::kNeverFits, std::move(why));
      continue;
    }
    demand_span_[wi] = {start, demand_pool_.size() - start};
    heads_[route.cq].order.push_back(wi);
  }
  // QueueOrderLess, on compact keys: sorting the large Workload structs in place of their
  // priority and age misses the cache on every comparison. Jobs applied together share their
  // priority and creation time, so the names decide: each key carries 16 bytes of its name from
  // where the queue's names start to differ (zero past the end, which orders a shorter name
  // first, as std::string does); only names equal in those bytes are compared whole.
  struct SortKey {
    int32_t priority;
    int w;
    int64_t creation_ms;
    uint64_t name_hi, name_lo;
  };
  std::vector<SortKey> keys;
  for (Head& h : heads_) {
    if (h.order.empty()) continue;
    std::string_view first = in_.workloads[h.order.front()].key;
    size_t common = first.size();
    for (int w : h.order) {
      const std::string& k = in_.workloads[w].key;
      common = std::min(common, k.size());
      common =
          std::mismatch(first.begin(), first.begin() + common, k.begin()).first - first.begin();
    }
    keys.clear();
    for (int w : h.order) {
      const Workload& wl = in_.workloads[w];
      const auto [hi, lo] = NameBytes(wl.key, common);
      keys.push_back({wl.priority, w, wl.creation_ms, hi, lo});
    }
    std::sort(keys.begin(), keys.end(), [&](const SortKey& a, const SortKey& b) {
      if (a.priority != b.priority) return a.priority > b.priority;
      if (a.creation_ms != b.creation_ms) return a.creation_ms < b.creation_ms;
      if (a.name_hi != b.name_hi) return a.name_hi < b.name_hi;
      if (a.name_lo != b.name_lo) return a.name_lo < b.name_lo;
      return QueueOrderLess(in_.workloads[a.w], in_.workloads[b.w]);
    });
    for (size_t i = 0; i < keys.size(); ++i) h.order[i] = keys[i].w;
  }
  // The pool in the order the pass reads it: each queue's workloads one after the other.
  std::vector<std::pair<int, int64_t>> pool;
  pool.reserve(demand_pool_.size());
  for (const Head& h : heads_) {
    for (int w : h.order) {
      const Demand d = DemandOf(w);
      demand_span_[w].first = pool.size();
      pool.insert(pool.end(), d.begin(), d.end());
    }
  }
  demand_pool_ = std::move(pool);
}

// The weighted share of each ClusterQueue's decayed past usage of its cohort's lendable quota.
void AdmissionPass::ComputeHistoryShares() {
  history_share_.assign(m_.queues.size(), 0);
  if (!in_.config.fair_sharing || in_.config.usage_half_life_ms <= 0) return;
  for (const UsageHistory& h : in_.history) {
    const int cq = m_.QueueOf(h.cluster_queue);
    if (cq < 0 || m_.ledger.CohortOf(cq) < 0) continue;
    double share = 0;
    for (const auto& [resource, value] : h.usage) {
      const int r = m_.ResourceOf(resource);
      if (r < 0) continue;
      int64_t lendable = 0;
      for (size_t f = 0; f < m_.catalog.flavor_names.size(); ++f)
        lendable += m_.ledger.CohortLendable(m_.ledger.CohortOf(cq),
                                             m_.catalog.Slot(static_cast<int>(f), r));
      if (lendable <= 0) continue;
      const double decayed =
          DecayedUsage(value, h.as_of_ms, now_ms_, in_.config.usage_half_life_ms);
      share = std::max(share, decayed / static_cast<double>(lendable));
    }
    const double weight = m_.specs[cq]->fair_weight;
    history_share_[cq] =
        share == 0 ? 0 : (weight <= 0 ? std::numeric_limits<double>::infinity() : share / weight);
  }
}

void AdmissionPass::Evaluate(int cq) {
  Head& h = heads_[cq];
  const int w = h.order[h.cursor];
  const Workload& wl = in_.workloads[w];
  const ClusterQueue& spec = *m_.specs[cq];
  AssignFlavorsInto(m_.catalog, m_.queues[cq], cq, DemandOf(w), wl.node_selector, wl.tolerations,
                    m_.ledger,
                    spec.preemption.borrow_within_cohort != BorrowWithinCohortPolicy::kNever ||
                        in_.config.fair_sharing,
                    h.assignment);
  h.key = HeadKey{h.assignment.borrowing, 0, 0, wl.priority, wl.creation_ms, &wl.key};
  if (in_.config.fair_sharing && !h.assignment.never) {
    std::vector<std::pair<int, int64_t>> extra;
    for (const SlotChoice& c : h.assignment.choices) extra.push_back({c.slot, c.amount});
    h.key.share = m_.ledger.DominantShare(cq, extra, m_.catalog.resource_of_slot, spec.fair_weight);
    h.key.history_share = history_share_[cq];
  }
  h.evaluated = true;
  h.version = m_.ledger.Version(cq);
}

// The ClusterQueue of `queues` whose head goes next, or -1 when every one is done.
int AdmissionPass::PickHead(const std::vector<int>& queues) {
  int best = -1;
  for (int cq : queues) {
    Head& h = heads_[cq];
    if (h.done) continue;
    if (h.cursor >= h.order.size()) {
      h.done = true;
      continue;
    }
    if (!h.evaluated || h.version != m_.ledger.Version(cq)) Evaluate(cq);
    if (best < 0 || HeadKeyLess(h.key, heads_[best].key)) best = cq;
  }
  return best;
}

void AdmissionPass::Admit(int cq, int w, const Assignment& a) {
  Admission admission;
  admission.cluster_queue = m_.cq_names[cq];
  admission.borrowing = a.borrowing;
  for (const SlotChoice& c : a.choices) {
    m_.ledger.AddUsed(cq, c.slot, c.amount);
    admission.resources.push_back(
        {m_.catalog.resource_names[c.resource], m_.catalog.flavor_names[c.flavor], c.amount});
  }
  result_.admitted.push_back({in_.workloads[w].key, std::move(admission)});
}

// Asks for victims; on success records the preemptions, holds the room for `w`, and says so.
bool AdmissionPass::TryPreempt(int cq, int w, const Assignment& a) {
  const Workload& wl = in_.workloads[w];
  const PreemptionPolicy& policy = m_.specs[cq]->preemption;
  if (policy.within_cluster_queue == WithinClusterQueuePolicy::kNever &&
      (m_.ledger.CohortOf(cq) < 0 ||
       policy.reclaim_within_cohort == ReclaimWithinCohortPolicy::kNever))
    return false;
  FailedSearches& failed = failed_[cq];
  if (failed.version != m_.ledger.Version(cq)) {
    failed.keys.clear();
    failed.version = m_.ledger.Version(cq);
  }
  std::vector<std::tuple<int, int64_t, int>> demand;
  demand.reserve(a.choices.size());
  for (const SlotChoice& c : a.choices)
    demand.emplace_back(c.slot, c.amount, static_cast<int>(c.mode));
  const bool by_age =
      policy.within_cluster_queue == WithinClusterQueuePolicy::kLowerOrNewerEqualPriority;
  auto key = std::make_tuple(wl.priority, by_age ? wl.creation_ms : 0, std::move(demand));
  if (failed.keys.count(key)) return false;
  PreemptionView view{&m_.admitted, &m_.admitted_by_cq,           &m_.cohort_members,
                      &m_.specs,    &m_.catalog.resource_of_slot, in_.config.fair_sharing};
  const auto targets = ChooseVictims(m_.ledger, view, {cq, wl.priority, wl.creation_ms}, a);
  if (targets.empty()) {
    failed.keys.insert(std::move(key));
    return false;
  }
  const std::string by = PreemptedByMessage(WorkloadName(wl.namespace_, wl.key), wl.priority);
  std::string names;
  for (const PreemptionTarget& t : targets) {
    AdmittedWorkload& victim = m_.admitted[t.admitted];
    victim.victim = true;
    for (const auto& [slot, amount] : victim.usage) m_.ledger.AddReleasing(victim.cq, slot, amount);
    result_.preemptions.push_back({*victim.key, wl.key, t.rule, by});
    const Workload& v = in_.workloads[victim.workload];
    names += (names.empty() ? "" : ", ") + WorkloadName(v.namespace_, v.key);
  }
  for (const SlotChoice& c : a.choices) m_.ledger.AddReserved(cq, c.slot, c.amount);
  Wait(w, cq, WaitKind::kPreempting,
       "waiting for " + std::to_string(targets.size()) + " preempted workload" +
           (targets.size() == 1 ? "" : "s") + " to stop: " + names);
  return true;
}

std::string AdmissionPass::QuotaMessage(int cq, const Assignment& a) {
  MessageCache& cache = messages_[cq];
  if (cache.version != m_.ledger.Version(cq)) {
    cache.messages.clear();
    cache.version = m_.ledger.Version(cq);
  }
  auto [it, inserted] = cache.messages.try_emplace({a.short_slot, a.short_need});
  if (inserted) it->second = BuildQuotaMessage(cq, a);
  return it->second;
}

std::string AdmissionPass::BuildQuotaMessage(int cq, const Assignment& a) const {
  TRAINLET_CHECK(a.short_slot >= 0);  // a workload that does not fit has a short resource
  const int slot = a.short_slot;
  const int r = m_.catalog.resource_of_slot[slot];
  const int f = slot / m_.catalog.resources();
  std::vector<Borrower> borrowers;
  const int cohort = m_.ledger.CohortOf(cq);
  if (cohort >= 0) {
    for (int other : m_.cohort_members[cohort]) {
      if (other == cq) continue;
      const int64_t over = m_.ledger.Effective(other, slot) - m_.ledger.Quota(other, slot).nominal;
      if (over > 0 && m_.ledger.Quota(other, slot).defined)
        borrowers.push_back({m_.cq_names[other], over});
    }
  }
  // The flavor is named only when the resource's group has a choice of flavors.
  const auto& group = m_.queues[cq].groups[m_.queues[cq].group_of_resource[r]];
  return WaitingForQuotaMessage(
      m_.catalog.resource_names[r], group.flavors.size() > 1 ? m_.catalog.flavor_names[f] : "",
      a.short_need, m_.cq_names[cq], m_.ledger.Available(cq, slot), borrowers);
}

// StrictFIFO: everything behind the head waits for it, except what can never fit (says so).
void AdmissionPass::BlockBehind(int cq, int w) {
  Head& h = heads_[cq];
  const Workload& head = in_.workloads[w];
  const std::string message = "waiting behind " + WorkloadName(head.namespace_, head.key) +
                              " (StrictFIFO ClusterQueue " + m_.cq_names[cq] + ")";
  for (size_t i = h.cursor + 1; i < h.order.size(); ++i) {
    const int other = h.order[i];
    Assignment a = AssignFlavors(m_.catalog, m_.queues[cq], cq, DemandOf(other),
                                 in_.workloads[other].node_selector, m_.ledger, false,
                                 in_.workloads[other].tolerations);
    if (a.never) {
      Wait(other, cq, WaitKind::kNeverFits, std::move(a.message));
    } else {
      Wait(other, cq, WaitKind::kBlocked, message);
    }
  }
  h.done = true;
}

void AdmissionPass::Process(int cq) {
  Head& h = heads_[cq];
  const int w = h.order[h.cursor];
  const Assignment& a = h.assignment;  // Process never evaluates a head: `a` stays valid
  h.evaluated = false;
  if (a.never) {
    Wait(w, cq, WaitKind::kNeverFits, a.message);
    ++h.cursor;
    return;
  }
  if (a.mode == FitMode::kFit) {
    Admit(cq, w, a);
    ++h.cursor;
    return;
  }
  if (a.mode != FitMode::kPreempt || !TryPreempt(cq, w, a)) {
    Wait(w, cq, WaitKind::kQuota, QuotaMessage(cq, a));
  }
  if (m_.specs[cq]->strategy == QueueingStrategy::kStrictFifo) {
    BlockBehind(cq, w);
  } else {
    ++h.cursor;
  }
}

// Each pending workload's place among the pending of its ClusterQueue, in queue order.
void AdmissionPass::Positions() {
  for (const Head& h : heads_) {
    int64_t position = 0;
    for (int w : h.order) {
      if (pending_slot_[w] >= 0) result_.pending[pending_slot_[w]].position = position++;
    }
  }
}

AdmissionResult AdmissionPass::Run() {
  if (in_.cluster_queues.empty() && in_.local_queues.empty()) {
    for (const Workload& w : in_.workloads)
      if (!w.admission) result_.admitted.push_back({w.key, Admission{"", {}, false, true}});
    return std::move(result_);
  }
  const bool within_before = m_.ledger.UsedWithinQuota(m_.cq_names, m_.catalog.slot_names).ok();
  heads_.resize(m_.queues.size());
  messages_.resize(m_.queues.size());
  failed_.resize(m_.queues.size());
  result_.pending.reserve(in_.workloads.size());
  result_.admitted.reserve(in_.workloads.size() / 4);
  demand_span_.assign(in_.workloads.size(), {0, 0});
  demand_pool_.reserve(in_.workloads.size() * 3);
  pending_slot_.assign(in_.workloads.size(), -1);
  Resolve();
  ComputeHistoryShares();
  // Queues share quota only inside a cohort, so each cohort (and each queue in none) is served
  // on its own: the order of heads matters only among its members.
  std::vector<std::vector<int>> groups = m_.cohort_members;
  for (int cq = 0; cq < static_cast<int>(heads_.size()); ++cq)
    if (m_.ledger.CohortOf(cq) < 0) groups.push_back({cq});
  for (const std::vector<int>& group : groups)
    for (int cq = PickHead(group); cq >= 0; cq = PickHead(group)) Process(cq);
  Positions();
  if (within_before) {
    const Status s = m_.ledger.UsedWithinQuota(m_.cq_names, m_.catalog.slot_names);
    TRAINLET_CHECK_MSG(s.ok(), "admission pass exceeded quota: " + s.message());
  }
  return std::move(result_);
}

}  // namespace

AdmissionResult RunAdmissionPass(const AdmissionInputs& inputs, int64_t now_ms) {
  return AdmissionPass(inputs, now_ms).Run();
}

Status UsageWithinQuota(const AdmissionInputs& state) {
  const AdmissionModel m = BuildAdmissionModel(state);
  return m.ledger.UsedWithinQuota(m.cq_names, m.catalog.slot_names);
}

AdmissionInputs ApplyAdmissionResult(AdmissionInputs state, const AdmissionResult& result,
                                     int64_t now_ms, bool victims_stopped) {
  ApplyAdmissionResultTo(state, result, now_ms, victims_stopped);
  return state;
}

void ApplyAdmissionResultTo(AdmissionInputs& state, const AdmissionResult& result, int64_t now_ms,
                            bool victims_stopped) {
  // Only the workloads the result names are looked for: a few among thousands waiting (indexing
  // every key cost a pass more than the rest of this function).
  constexpr size_t kUnseen = ~size_t{0};
  std::unordered_map<std::string_view, size_t> index;
  for (const auto& [key, admission] : result.admitted) index.emplace(key, kUnseen);
  if (victims_stopped) {
    for (const Preemption& p : result.preemptions) index.emplace(p.victim, kUnseen);
  }
  for (size_t i = 0; i < state.workloads.size() && !index.empty(); ++i) {
    auto it = index.find(state.workloads[i].key);
    if (it != index.end() && it->second == kUnseen) it->second = i;  // the first, as before
  }
  auto at = [&](const std::string& key) -> Workload& {
    const size_t i = index.at(key);
    TRAINLET_CHECK_MSG(i != kUnseen, "no workload " + key);
    return state.workloads[i];
  };
  for (const auto& [key, admission] : result.admitted) {
    Workload& w = at(key);
    TRAINLET_CHECK_MSG(!w.admission, "admitted twice: " + key);
    w.admission = admission;
    w.admitted_ms = now_ms;
  }
  if (victims_stopped) {
    for (const Preemption& p : result.preemptions) {
      Workload& w = at(p.victim);
      w.admission.reset();
      w.admitted_ms = 0;
    }
  }
}

}  // namespace trainlet::coordinator::admission
