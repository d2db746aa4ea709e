#include "coordinator/failure_rules.h"

#include <algorithm>
#include <regex>

#include "common/trainjob/failure_policy.h"

namespace trainlet::coordinator {
namespace {

using trainjob::FailureRule;

bool Contains(const std::vector<std::string>& list, std::string_view value) {
  return std::find(list.begin(), list.end(), value) != list.end();
}

// A pattern was checked at apply (ReadFailurePolicy); one that no longer compiles matches nothing.
bool PatternFound(const std::string& pattern, std::string_view job_message,
                  const std::string& cause) {
  try {
    const std::regex re(pattern);
    return std::regex_search(job_message.begin(), job_message.end(), re) ||
           std::regex_search(cause, re);
  } catch (const std::regex_error&) {
    return false;
  }
}

bool Matches(const FailureRule& rule, const AttemptFailure& failure, std::string_view reason) {
  if (!rule.on_job_failure_reasons.empty() && !Contains(rule.on_job_failure_reasons, reason)) {
    return false;
  }
  if (!rule.target_replicated_jobs.empty() &&
      !Contains(rule.target_replicated_jobs, failure.replicated_job) &&
      std::none_of(
          failure.replicated_jobs.begin(), failure.replicated_jobs.end(),
          [&](const std::string& rj) { return Contains(rule.target_replicated_jobs, rj); })) {
    return false;
  }
  if (rule.on_job_failure_message_patterns.empty()) return true;
  const std::string_view job_message = trainjob::JobFailureMessage(reason);
  return std::any_of(
      rule.on_job_failure_message_patterns.begin(), rule.on_job_failure_message_patterns.end(),
      [&](const std::string& p) { return PatternFound(p, job_message, failure.message); });
}

// The suffix FailureDecision::rule carries for a restart that is not counted; RestartsUsed reads
// it back from the attempt records.
const std::string kNotCountedSuffix = " (" + std::string(trainjob::kActionRestartIgnoringMax) + ")";

}  // namespace

Result<RestartPolicy> RestartPolicyOf(const trainjob::TrainJob& job) {
  auto it = job.annotations.find(std::string(kRestartPolicyAnnotation));
  if (it == job.annotations.end() || it->second == "OnFailure") return RestartPolicy::kOnFailure;
  if (it->second == "ExitCode") return RestartPolicy::kExitCode;
  return InvalidError("TrainJob/" + job.name + ": metadata.annotations[" +
                      std::string(kRestartPolicyAnnotation) +
                      "]: must be ExitCode or OnFailure, got \"" + it->second + "\"");
}

std::string ReplicatedJobOf(const v1::RankStatus& rank) {
  return rank.step().empty() ? std::string("node") : rank.step();
}

AttemptFailure FailureOfRanks(const v1::JobStatus& status,
                              const std::function<bool(const v1::RankStatus&)>& took,
                              std::string message) {
  AttemptFailure f;
  f.message = std::move(message);
  for (const auto& r : status.ranks()) {
    if (!took(r)) continue;
    const std::string rj = ReplicatedJobOf(r);
    if (!Contains(f.replicated_jobs, rj)) f.replicated_jobs.push_back(rj);
  }
  return f;
}

AttemptFailure FailureOnNode(const v1::JobStatus& status, const std::string& node,
                             const std::function<bool(const v1::RankStatus&)>& took,
                             std::string message) {
  return FailureOfRanks(
      status, [&](const v1::RankStatus& r) { return r.node() == node && took(r); },
      std::move(message));
}

AttemptFailure FailureOfRank(const v1::RankStatus& rank, std::string message) {
  AttemptFailure f;
  f.replicated_job = ReplicatedJobOf(rank);
  f.message = std::move(message);
  if (rank.rank_state() == v1::RANK_STATE_START_FAILED) {
    f.kind = AttemptFailure::Kind::kStartFailed;
  } else if (rank.signal() != 0) {
    f.kind = AttemptFailure::Kind::kSignaled;
    f.signal = rank.signal();
  } else {
    f.kind = AttemptFailure::Kind::kExited;
    f.exit_code = rank.exit_code();
  }
  return f;
}

FailureDecision DecideFailure(const std::vector<FailureRule>& rules, RestartPolicy policy,
                              const AttemptFailure& failure, uint32_t restarts_used,
                              uint32_t max_restarts) {
  using Action = FailureDecision::Action;
  FailureDecision d;
  // Every failure trainlet sees fails its Job of backoffLimit 0 (failure_rules.h).
  d.reason = std::string(trainjob::kReasonBackoffLimitExceeded);
  if (policy == RestartPolicy::kExitCode && failure.kind == AttemptFailure::Kind::kExited &&
      failure.exit_code >= 1 && failure.exit_code <= 127) {
    d.action = Action::kFail;
    d.rule = "ExitCode (permanent exit code " + std::to_string(failure.exit_code) + ")";
    return d;
  }
  std::string action(trainjob::kActionRestartJobSet);  // JobSet's default
  for (const FailureRule& rule : rules) {
    if (!Matches(rule, failure, d.reason)) continue;
    action = rule.action;
    d.rule = rule.name + " (" + rule.action + ")";
    break;
  }
  if (action == trainjob::kActionFailJobSet) {
    d.action = Action::kFail;
  } else if (action == trainjob::kActionRestartIgnoringMax) {
    d.action = Action::kRestartNotCounted;
  } else if (restarts_used < max_restarts) {
    d.action = Action::kRestart;
  } else {
    d.action = Action::kFail;
    d.limit_reached = true;
  }
  return d;
}

uint32_t RestartsUsed(const v1::JobStatus& status) {
  uint32_t used = 0;
  for (int i = 0; i + 1 < status.attempts_size(); ++i) {
    const v1::AttemptRecord& a = status.attempts(i);
    if (a.attempt_result() == v1::ATTEMPT_RESULT_FAILED && !a.infrastructure() &&
        !a.failure_rule().ends_with(kNotCountedSuffix)) {
      ++used;
    }
  }
  return used;
}

}  // namespace trainlet::coordinator
