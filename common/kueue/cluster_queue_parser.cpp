// ClusterQueue.spec, read after the CRD schema passed it, with the checks Kueue's webhook and the
// CRD's CEL rules make (which the schema validator skips): kueue_model.h lists them.
#include <set>

#include "common/kueue/parse_support.h"

namespace trainlet::kueue::internal {

using trainjob::AppendIndex;
using trainjob::IsSet;
using trainjob::MapGet;
using trainjob::QuoteForMessage;

namespace {

std::vector<std::string> TextList(const YAML::Node& n) {
  std::vector<std::string> out;
  if (!n.IsSequence()) return out;
  for (auto it = n.begin(); it != n.end(); ++it) out.push_back(Text(*it));
  return out;
}

Result<LabelSelector> ReadSelector(const YAML::Node& n, const std::string& path,
                                   const DocLabel& doc) {
  LabelSelector s;
  s.match_labels = StringMap(MapGet(n, "matchLabels"));
  const YAML::Node exprs = MapGet(n, "matchExpressions");
  for (size_t i = 0; exprs.IsSequence() && i < exprs.size(); ++i) {
    const std::string at = AppendIndex(path + ".matchExpressions", i);
    LabelSelector::Requirement r{Text(MapGet(exprs[i], "key")), Text(MapGet(exprs[i], "operator")),
                                 TextList(MapGet(exprs[i], "values"))};
    if (r.op == "In" || r.op == "NotIn") {
      if (r.values.empty()) {
        return doc.Error(at + ".values", "must be non-empty when operator is " + r.op);
      }
    } else if (r.op == "Exists" || r.op == "DoesNotExist") {
      if (!r.values.empty()) {
        return doc.Error(at + ".values", "must be empty when operator is " + r.op);
      }
    } else {
      return doc.Error(at + ".operator", QuoteForMessage(r.op) +
                                             " is not a valid selector operator (In, NotIn, "
                                             "Exists or DoesNotExist)");
    }
    s.match_expressions.push_back(std::move(r));
  }
  return s;
}

// One flavor's quotas: exactly the group's coveredResources, in order.
Result<FlavorQuotas> ReadFlavorQuotas(const YAML::Node& f, const std::vector<std::string>& covered,
                                      const std::string& path, bool in_cohort,
                                      const DocLabel& doc) {
  FlavorQuotas out;
  out.name = Text(MapGet(f, "name"));
  const YAML::Node resources = MapGet(f, "resources");
  if (resources.size() != covered.size()) {
    return doc.Error(path + ".resources",
                     "must list the group's " + std::to_string(covered.size()) +
                         " coveredResources, got " + std::to_string(resources.size()));
  }
  for (size_t i = 0; i < resources.size(); ++i) {
    const std::string at = AppendIndex(path + ".resources", i);
    ResourceQuota q;
    q.name = Text(MapGet(resources[i], "name"));
    if (q.name != covered[i]) {
      return doc.Error(at + ".name", "must be " + QuoteForMessage(covered[i]) +
                                         ", the group's coveredResources[" + std::to_string(i) +
                                         "], got " + QuoteForMessage(q.name));
    }
    TRAINLET_ASSIGN_OR_RETURN(q.nominal, ReadQuantity(MapGet(resources[i], "nominalQuota"), q.name,
                                                      at + ".nominalQuota", doc));
    if (const YAML::Node b = MapGet(resources[i], "borrowingLimit"); IsSet(b)) {
      if (!in_cohort) return doc.Error(at + ".borrowingLimit", "must not be set without a cohort");
      TRAINLET_ASSIGN_OR_RETURN(q.borrowing_limit,
                                ReadQuantity(b, q.name, at + ".borrowingLimit", doc));
    }
    if (const YAML::Node l = MapGet(resources[i], "lendingLimit"); IsSet(l)) {
      if (!in_cohort) return doc.Error(at + ".lendingLimit", "must not be set without a cohort");
      TRAINLET_ASSIGN_OR_RETURN(q.lending_limit,
                                ReadQuantity(l, q.name, at + ".lendingLimit", doc));
      if (q.lending_limit->units > q.nominal.units) {
        return doc.Error(at + ".lendingLimit", "must be at most the nominalQuota (" +
                                                   q.nominal.text + "), got " +
                                                   q.lending_limit->text);
      }
    }
    out.resources.push_back(std::move(q));
  }
  return out;
}

Status ReadResourceGroups(const YAML::Node& groups, bool in_cohort, const DocLabel& doc,
                          ClusterQueue* cq) {
  if (!IsSet(groups)) return Status::Ok();
  if (groups.size() > kMaxResourceGroups) {
    return doc.Error("spec.resourceGroups", "must have at most " +
                                                std::to_string(kMaxResourceGroups) +
                                                " items, got " + std::to_string(groups.size()));
  }
  std::set<std::string> resources_seen, flavors_seen;
  for (size_t g = 0; g < groups.size(); ++g) {
    const std::string path = AppendIndex("spec.resourceGroups", g);
    ResourceGroup group;
    group.covered_resources = TextList(MapGet(groups[g], "coveredResources"));
    for (size_t i = 0; i < group.covered_resources.size(); ++i) {
      if (!resources_seen.insert(group.covered_resources[i]).second) {
        return doc.Error(AppendIndex(path + ".coveredResources", i),
                         QuoteForMessage(group.covered_resources[i]) +
                             " is covered by more than one resource group");
      }
    }
    const YAML::Node flavors = MapGet(groups[g], "flavors");
    for (size_t f = 0; f < flavors.size(); ++f) {
      const std::string at = AppendIndex(path + ".flavors", f);
      TRAINLET_ASSIGN_OR_RETURN(
          FlavorQuotas fq,
          ReadFlavorQuotas(flavors[f], group.covered_resources, at, in_cohort, doc));
      if (!flavors_seen.insert(fq.name).second) {
        return doc.Error(at + ".name", QuoteForMessage(fq.name) +
                                           " is listed more than once in spec.resourceGroups");
      }
      group.flavors.push_back(std::move(fq));
    }
    cq->resource_groups.push_back(std::move(group));
  }
  return Status::Ok();
}

Status ReadPreemption(const YAML::Node& p, const DocLabel& doc, Preemption* out) {
  using P = Preemption;
  const std::string within = Text(MapGet(p, "withinClusterQueue"));
  out->within_cluster_queue = within == "LowerPriority" ? P::WithinClusterQueue::kLowerPriority
                              : within == "LowerOrNewerEqualPriority"
                                  ? P::WithinClusterQueue::kLowerOrNewerEqualPriority
                                  : P::WithinClusterQueue::kNever;
  const std::string reclaim = Text(MapGet(p, "reclaimWithinCohort"));
  out->reclaim_within_cohort = reclaim == "LowerPriority" ? P::ReclaimWithinCohort::kLowerPriority
                               : reclaim == "Any"         ? P::ReclaimWithinCohort::kAny
                                                          : P::ReclaimWithinCohort::kNever;
  const YAML::Node borrow = MapGet(p, "borrowWithinCohort");
  out->borrow_within_cohort = Text(MapGet(borrow, "policy")) == "LowerPriority"
                                  ? P::BorrowWithinCohort::kLowerPriority
                                  : P::BorrowWithinCohort::kNever;
  if (const YAML::Node t = MapGet(borrow, "maxPriorityThreshold"); IsSet(t)) {
    out->borrow_max_priority_threshold =
        static_cast<int32_t>(trainjob::ParseInt64(Text(t)).value_or(0));
  }
  // The CRD's CEL rule.
  if (out->reclaim_within_cohort == P::ReclaimWithinCohort::kNever &&
      out->borrow_within_cohort != P::BorrowWithinCohort::kNever) {
    return doc.Error("spec.preemption.borrowWithinCohort.policy",
                     "must be Never while reclaimWithinCohort is Never");
  }
  return Status::Ok();
}

// spec.admissionChecks (names) or spec.admissionChecksStrategy.admissionChecks (names, each with
// the flavors it runs on); Kueue's webhook refuses both at once.
Status ReadAdmissionChecks(const YAML::Node& spec, const DocLabel& doc, ClusterQueue* cq) {
  const YAML::Node plain = MapGet(spec, "admissionChecks");
  const YAML::Node strategy = MapGet(spec, "admissionChecksStrategy");
  if (IsSet(plain) && plain.size() > 0 && IsSet(strategy)) {
    return doc.Error("spec.admissionChecks",
                     "must not be set together with spec.admissionChecksStrategy (set one)");
  }
  std::set<std::string> seen;
  auto add = [&](AdmissionCheckRef ref, const std::string& at) -> Status {
    if (!seen.insert(ref.name).second) {
      return doc.Error(at, QuoteForMessage(ref.name) + " is listed more than once");
    }
    cq->admission_checks.push_back(std::move(ref));
    return Status::Ok();
  };
  for (size_t i = 0; plain.IsSequence() && i < plain.size(); ++i) {
    TRAINLET_RETURN_IF_ERROR(add({Text(plain[i]), {}}, AppendIndex("spec.admissionChecks", i)));
  }
  const YAML::Node checks = MapGet(strategy, "admissionChecks");
  for (size_t i = 0; checks.IsSequence() && i < checks.size(); ++i) {
    TRAINLET_RETURN_IF_ERROR(
        add({Text(MapGet(checks[i], "name")), TextList(MapGet(checks[i], "onFlavors"))},
            AppendIndex("spec.admissionChecksStrategy.admissionChecks", i) + ".name"));
  }
  return Status::Ok();
}

}  // namespace

Result<ClusterQueue> ReadClusterQueue(const YAML::Node& spec, const std::string& name,
                                      const DocLabel& doc) {
  ClusterQueue cq;
  cq.name = name;
  if (const YAML::Node sel = MapGet(spec, "namespaceSelector"); IsSet(sel)) {
    TRAINLET_ASSIGN_OR_RETURN(cq.namespace_selector,
                              ReadSelector(sel, "spec.namespaceSelector", doc));
  }
  cq.cohort = Text(MapGet(spec, "cohort"));
  TRAINLET_RETURN_IF_ERROR(
      ReadResourceGroups(MapGet(spec, "resourceGroups"), !cq.cohort.empty(), doc, &cq));
  if (Text(MapGet(spec, "queueingStrategy")) == "StrictFIFO") {
    cq.queueing_strategy = QueueingStrategy::kStrictFifo;
  }
  TRAINLET_RETURN_IF_ERROR(ReadPreemption(MapGet(spec, "preemption"), doc, &cq.preemption));
  if (const YAML::Node w = MapGet(MapGet(spec, "fairSharing"), "weight"); IsSet(w)) {
    auto weight = ParseQuantity(Text(w), 1000);
    if (!weight.ok()) return doc.Error("spec.fairSharing.weight", weight.status().message());
    cq.fair_sharing_weight_milli = *weight;
  }
  if (IsSet(MapGet(spec, "stopPolicy"))) cq.stop_policy = Text(MapGet(spec, "stopPolicy"));
  // The schema checked the enums; unset means Kueue's defaults.
  const YAML::Node fungibility = MapGet(spec, "flavorFungibility");
  if (Text(MapGet(fungibility, "whenCanBorrow")) == "TryNextFlavor") {
    cq.flavor_fungibility.when_can_borrow = FlavorFungibility::WhenCanBorrow::kTryNextFlavor;
  }
  if (Text(MapGet(fungibility, "whenCanPreempt")) == "Preempt") {
    cq.flavor_fungibility.when_can_preempt = FlavorFungibility::WhenCanPreempt::kPreempt;
  }
  TRAINLET_RETURN_IF_ERROR(ReadAdmissionChecks(spec, doc, &cq));
  return cq;
}

}  // namespace trainlet::kueue::internal
