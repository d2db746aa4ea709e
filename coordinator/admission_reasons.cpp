#include "coordinator/admission_reasons.h"

#include "coordinator/admission_types.h"

namespace trainlet::coordinator::admission {

std::string FormatAmount(std::string_view resource, int64_t amount) {
  if (resource == kCpu) {
    if (amount % 1000 == 0) return std::to_string(amount / 1000);
    return std::to_string(amount) + "m";
  }
  if (resource == kMemory && amount != 0) {
    static constexpr const char* kSuffix[] = {"Ei", "Pi", "Ti", "Gi", "Mi", "Ki"};
    for (int i = 0; i < 6; ++i) {
      const int64_t unit = int64_t{1} << (10 * (6 - i));
      if (amount % unit == 0) return std::to_string(amount / unit) + kSuffix[i];
    }
  }
  return std::to_string(amount);
}

std::string WorkloadName(std::string_view namespace_, std::string_view key) {
  // A key outside `default` is "<namespace>.<name>"; users see "<namespace>/<name>".
  std::string_view name = key;
  const std::string prefix = std::string(namespace_) + ".";
  if (name.substr(0, prefix.size()) == prefix) name.remove_prefix(prefix.size());
  std::string out(namespace_);
  out += '/';
  out += name;
  return out;
}

std::string PreemptedByMessage(std::string_view preemptor_name, int32_t priority) {
  return "Preempted by " + std::string(preemptor_name) + " (priority " + std::to_string(priority) +
         ")";
}

static std::string Need(std::string_view resource, std::string_view flavor, int64_t need) {
  std::string out = FormatAmount(resource, need);
  out += ' ';
  out += resource;
  if (!flavor.empty()) {
    out += " of flavor ";
    out += flavor;
  }
  return out;
}

std::string WaitingForQuotaMessage(std::string_view resource, std::string_view flavor, int64_t need,
                                   std::string_view cluster_queue, int64_t free,
                                   const std::vector<Borrower>& borrowers) {
  std::string out = "waiting for " + Need(resource, flavor, need) + " in ClusterQueue ";
  out += cluster_queue;
  out += ", " + FormatAmount(resource, free < 0 ? 0 : free) + " free";
  for (const Borrower& b : borrowers) {
    out += ", " + FormatAmount(resource, b.amount) + " borrowed by " + b.cluster_queue;
  }
  return out;
}

std::string NeverFitsMessage(std::string_view resource, std::string_view flavor, int64_t need,
                             std::string_view cluster_queue, int64_t potential,
                             bool with_borrowing) {
  std::string out = "can never fit: needs " + Need(resource, flavor, need) + ", ClusterQueue ";
  out += cluster_queue;
  out += with_borrowing ? " can reach at most " : " has at most ";
  out += FormatAmount(resource, potential);
  if (with_borrowing) out += " with borrowing";
  return out;
}

}  // namespace trainlet::coordinator::admission

namespace trainlet::coordinator::admission {

const char* PreemptionRuleName(PreemptionRule rule) {
  switch (rule) {
    case PreemptionRule::kInClusterQueue:
      return "InClusterQueue";
    case PreemptionRule::kInCohortReclamation:
      return "InCohortReclamation";
    case PreemptionRule::kInCohortReclaimWhileBorrowing:
      return "InCohortReclaimWhileBorrowing";
    case PreemptionRule::kInCohortFairSharing:
      return "InCohortFairSharing";
  }
  return "Unknown";
}

}  // namespace trainlet::coordinator::admission
