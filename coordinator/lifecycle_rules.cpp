#include "coordinator/lifecycle_rules.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <utility>

#include "coordinator/job_state_machine.h"
#include "coordinator/rank_state_machine.h"

namespace trainlet::coordinator {
namespace {

// The TrainJob document with spec.suspend removed, re-emitted, so two documents that differ only
// in suspend compare equal. Both sides come from the same parser's emitter.
Result<std::string> WithoutSuspend(const std::string& yaml) {
  try {
    YAML::Node doc = YAML::Load(yaml);
    YAML::Node spec = doc["spec"];
    if (spec.IsMap()) spec.remove("suspend");
    YAML::Emitter out;
    out << doc;
    return std::string(out.c_str());
  } catch (const YAML::Exception& e) {
    return InvalidError(std::string("stored TrainJob no longer parses: ") + e.what());
  }
}

}  // namespace

Result<uint32_t> RestartLimit(const trainjob::TrainJob& job,
                              const trainjob::TrainingRuntime& runtime) {
  auto it = job.annotations.find(std::string(kMaxRestartsAnnotation));
  if (it == job.annotations.end()) return static_cast<uint32_t>(std::max(0, runtime.max_restarts));
  const std::string& text = it->second;
  const bool digits =
      !text.empty() && text.size() <= 4 &&
      std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
  const long value = digits ? std::strtol(text.c_str(), nullptr, 10) : -1;
  if (value < 0 || value > kMaxRestartsLimit) {
    return InvalidError("TrainJob/" + job.name + ": metadata.annotations[" +
                        std::string(kMaxRestartsAnnotation) + "]: must be an integer from 0 to " +
                        std::to_string(kMaxRestartsLimit) + ", got \"" + text + "\"");
  }
  return static_cast<uint32_t>(value);
}

std::chrono::milliseconds RestartBackoff(uint32_t restarts_used, std::chrono::milliseconds first,
                                         std::chrono::milliseconds max) {
  const int shift = static_cast<int>(std::min<uint32_t>(restarts_used, 16));
  return std::min(first * (1 << shift), max);
}

int64_t RestartHoldMs(int64_t last_heard_ms, std::chrono::milliseconds partition_grace,
                      uint32_t stop_grace_ms) {
  return last_heard_ms + partition_grace.count() + int64_t{stop_grace_ms} + kRestartHoldMarginMs;
}

bool RankEnded(const v1::RankStatus& r) { return !IsRankActive(r.rank_state()); }

int64_t ActiveDeadlineMs(const trainjob::TrainJob& spec, int64_t created_unix_ms) {
  if (!spec.active_deadline_seconds) return INT64_MAX;
  const int64_t seconds = std::max<int64_t>(0, *spec.active_deadline_seconds);
  // Far-future deadlines (the CRD allows any int64) must not overflow.
  if (seconds > (INT64_MAX - created_unix_ms) / 1000) return INT64_MAX;
  return created_unix_ms + seconds * 1000;
}

int64_t StartDeadlineMs(const v1::JobStatus& st, std::chrono::milliseconds start_timeout) {
  if (PhaseOf(st) != JobPhase::kStarting || st.deleting() || st.attempts_size() == 0) {
    return INT64_MAX;
  }
  const auto& rec = st.attempts(st.attempts_size() - 1);
  if (AttemptEnded(rec)) return INT64_MAX;
  const bool pending = std::any_of(st.ranks().begin(), st.ranks().end(), [](const auto& r) {
    return r.rank_state() == v1::RANK_STATE_PENDING;
  });
  return pending ? rec.started_unix_ms() + start_timeout.count() : INT64_MAX;
}

void EndAttemptRecord(v1::JobStatus& st, AttemptTrigger result, const std::string& cause,
                      int64_t now_ms) {
  if (st.attempts_size() == 0) return;
  auto* rec = st.mutable_attempts(st.attempts_size() - 1);
  if (AttemptEnded(*rec)) return;
  TRAINLET_CHECK(ApplyAttemptTrigger(*rec, result).ok());
  rec->set_cause(cause);
  rec->set_ended_unix_ms(now_ms);
}

Result<SuspendFlip> PrepareSuspend(const v1::JobStatus& st, bool suspend, std::string spec_yaml,
                                   const std::string& how, int64_t now_ms) {
  const JobPhase phase = PhaseOf(st);
  const std::string verb = suspend ? "suspended" : "resumed";
  if (IsTerminal(phase)) {
    return InvalidError("trainjob/" + st.name() + " is " + JobPhaseName(phase) +
                        ": a finished job cannot be " + verb);
  }
  if (st.deleting()) {
    return InvalidError("trainjob/" + st.name() + " is being deleted: it cannot be " + verb);
  }
  SuspendFlip flip{st.name(), suspend, std::move(spec_yaml), st};
  Status s;
  if (suspend) {
    // A suspend is not a failure: the attempt ends "Stopped" and no restart is used up.
    EndAttemptRecord(flip.status, AttemptTrigger::kStopped, "suspended", now_ms);
    s = ApplyTransition(flip.status, JobTrigger::kSuspend, std::string(kReasonSuspended),
                        "suspended by " + how + "; every rank is stopped", now_ms);
  } else {
    s = ApplyTransition(flip.status, JobTrigger::kResume, std::string(kReasonResumed),
                        "resumed by " + how + "; a new attempt starts once the gang is placed",
                        now_ms);
  }
  if (!s.ok()) return s;
  return flip;
}

Result<std::optional<SuspendFlip>> CompareWithStored(const JobRecord& stored, bool stored_suspend,
                                                     const trainjob::TrainJob& spec,
                                                     const std::string& source, int64_t now_ms) {
  if (stored.spec_yaml == spec.yaml) return std::optional<SuspendFlip>();
  TRAINLET_ASSIGN_OR_RETURN(std::string before, WithoutSuspend(stored.spec_yaml));
  TRAINLET_ASSIGN_OR_RETURN(std::string applied, WithoutSuspend(spec.yaml));
  if (before != applied) {
    return Status(ErrorCode::kExists,
                  "trainjob/" + spec.name +
                      " already exists with a different spec (only spec.suspend may change); "
                      "delete it first (trainletctl delete trainjob " +
                      spec.name + ")");
  }
  // The same job; "suspend: false" written out where it was absent is no change.
  if (spec.suspend == stored_suspend) return std::optional<SuspendFlip>();
  TRAINLET_ASSIGN_OR_RETURN(
      SuspendFlip flip,
      PrepareSuspend(stored.status, spec.suspend, spec.yaml,
                     "apply of " + (source.empty() ? std::string("stdin") : source), now_ms));
  flip.job = stored.name;
  return std::optional<SuspendFlip>(std::move(flip));
}

Result<std::string> WithSuspend(const std::string& yaml, bool suspend) {
  try {
    YAML::Node doc = YAML::Load(yaml);
    doc["spec"]["suspend"] = suspend;
    YAML::Emitter out;
    out << doc;
    return std::string(out.c_str()) + "\n";
  } catch (const YAML::Exception& e) {
    return InvalidError(std::string("stored TrainJob no longer parses: ") + e.what());
  }
}

Status StoreSuspend(JobStore& store, const SuspendFlip& flip) {
  TRAINLET_RETURN_IF_ERROR(store.UpdateSpec(flip.job, flip.spec_yaml));
  return store.UpdateStatus(flip.job, flip.status);
}

}  // namespace trainlet::coordinator
