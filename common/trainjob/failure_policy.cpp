#include "common/trainjob/failure_policy.h"

#include <algorithm>
#include <regex>
#include <set>

namespace trainlet::trainjob {
namespace {

constexpr std::string_view kRulesPath = "spec.template.spec.failurePolicy.rules";
constexpr size_t kMaxRuleNameLength = 128;  // JobSet's webhook

// JobSet's ruleNameFmt: ^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$
bool IsRuleName(std::string_view s) {
  auto alpha = [](char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'); };
  auto digit = [](char c) { return c >= '0' && c <= '9'; };
  if (s.empty() || s.size() > kMaxRuleNameLength || !alpha(s.front())) return false;
  if (s.size() > 1 && !(alpha(s.back()) || digit(s.back()) || s.back() == '_')) return false;
  return std::all_of(s.begin(), s.end(), [&](char c) {
    return alpha(c) || digit(c) || c == '_' || c == ',' || c == ':';
  });
}

std::string Join(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

// Checks one rule's lists against the template; `path` is the rule's.
Status CheckRuleLists(const FailureRule& rule, const std::string& path, const std::string& label,
                      const TrainingRuntime& rt) {
  for (size_t i = 0; i < rule.on_job_failure_reasons.size(); ++i) {
    const std::string& reason = rule.on_job_failure_reasons[i];
    if (std::find(kJobFailureReasons.begin(), kJobFailureReasons.end(), reason) ==
        kJobFailureReasons.end()) {
      return InvalidError(label + ": " + AppendIndex(path + ".onJobFailureReasons", i) + ": " +
                          QuoteForMessage(reason) +
                          " is not a Job failure reason (BackoffLimitExceeded, DeadlineExceeded, "
                          "PodFailurePolicy, FailedIndexes, MaxFailedIndexesExceeded)");
    }
  }
  for (size_t i = 0; i < rule.target_replicated_jobs.size(); ++i) {
    const std::string& target = rule.target_replicated_jobs[i];
    if (std::find(rt.replicated_jobs.begin(), rt.replicated_jobs.end(), target) ==
        rt.replicated_jobs.end()) {
      return InvalidError(label + ": " + AppendIndex(path + ".targetReplicatedJobs", i) +
                          ": no replicatedJob " + QuoteForMessage(target) +
                          " in this template (replicatedJobs: " + Join(rt.replicated_jobs) + ")");
    }
  }
  for (size_t i = 0; i < rule.on_job_failure_message_patterns.size(); ++i) {
    try {
      std::regex re(rule.on_job_failure_message_patterns[i]);
    } catch (const std::regex_error& e) {
      return InvalidError(label + ": " + AppendIndex(path + ".onJobFailureMessagePatterns", i) +
                          ": not a regular expression: " + e.what());
    }
  }
  return Status::Ok();
}

}  // namespace

std::string_view JobFailureMessage(std::string_view reason) {
  if (reason == kReasonBackoffLimitExceeded) return "Job has reached the specified backoff limit";
  if (reason == kReasonDeadlineExceeded) return "Job was active longer than specified deadline";
  return {};
}

Status ReadFailurePolicy(const YAML::Node& jobset, const std::string& label, TrainingRuntime* rt,
                         const WarnFn& warn) {
  const YAML::Node ttl = MapGet(jobset, "ttlSecondsAfterFinished");
  if (ttl.IsScalar()) {
    // The schema checked an int32 of at least 0.
    if (auto v = ParseInt64(ttl.Scalar()))
      rt->ttl_seconds_after_finished = static_cast<int32_t>(*v);
  }
  const YAML::Node rules = MapGet(MapGet(jobset, "failurePolicy"), "rules");
  if (!rules.IsSequence()) return Status::Ok();
  std::set<std::string> names;
  size_t i = 0;
  for (auto it = rules.begin(); it != rules.end(); ++it, ++i) {
    const std::string path = AppendIndex(std::string(kRulesPath), i);
    FailureRule rule;
    rule.name = ScalarText(MapGet(*it, "name"));
    rule.action = ScalarText(MapGet(*it, "action"));
    rule.on_job_failure_reasons = ScalarList(MapGet(*it, "onJobFailureReasons"));
    rule.on_job_failure_message_patterns = ScalarList(MapGet(*it, "onJobFailureMessagePatterns"));
    rule.target_replicated_jobs = ScalarList(MapGet(*it, "targetReplicatedJobs"));
    if (!IsRuleName(rule.name)) {
      return InvalidError(label + ": " + path + ".name: " + QuoteForMessage(rule.name) +
                          " must start with a letter, then letters, digits, '_', ',' or ':', end "
                          "with a letter, digit or '_', at most 128 characters");
    }
    if (!names.insert(rule.name).second) {
      return InvalidError(label + ": " + path + ".name: rule name " + QuoteForMessage(rule.name) +
                          " is not unique");
    }
    TRAINLET_RETURN_IF_ERROR(CheckRuleLists(rule, path, label, *rt));
    if (rule.action == "RestartJob" || rule.action == "RestartJobAndIgnoreMaxRestarts") {
      const bool ignore = rule.action == "RestartJobAndIgnoreMaxRestarts";
      warn(path + ".action",
           rule.action + " restarts the whole gang, as " +
               std::string(ignore ? kActionRestartIgnoringMax : kActionRestartJobSet) +
               " (trainlet restarts every replicated job of an attempt together)");
      rule.action = std::string(ignore ? kActionRestartIgnoringMax : kActionRestartJobSet);
    }
    rt->failure_rules.push_back(std::move(rule));
  }
  return Status::Ok();
}

}  // namespace trainlet::trainjob
