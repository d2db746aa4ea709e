// JobController's lifecycle rules beside placement: active deadlines, suspend and resume, and the
// restart limit. Split from job_controller.cpp by responsibility; same class, same loop.
#include <spdlog/spdlog.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>

#include "coordinator/job_controller.h"
#include "coordinator/job_state_machine.h"
#include "coordinator/rank_state_machine.h"

namespace trainlet::coordinator {
namespace {

// Closes the attempt record of the current attempt, unless it already ended.
void EndAttemptRecord(v1::JobStatus& st, AttemptTrigger result, const std::string& cause,
                      int64_t now_ms) {
  if (st.attempts_size() == 0) return;
  auto* rec = st.mutable_attempts(st.attempts_size() - 1);
  if (AttemptEnded(*rec)) return;
  TRAINLET_CHECK(ApplyAttemptTrigger(*rec, result).ok());
  rec->set_cause(cause);
  rec->set_ended_unix_ms(now_ms);
}

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

// The TrainJob document with spec.suspend set to `suspend`.
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

}  // namespace

Result<uint32_t> RestartLimit(const trainjob::TrainJob& job,
                              const trainjob::TrainingRuntime& runtime) {
  auto it = job.annotations.find(std::string(kMaxRestartsAnnotation));
  if (it == job.annotations.end()) return static_cast<uint32_t>(std::max(0, runtime.max_restarts));
  const std::string& text = it->second;
  const bool digits = !text.empty() && text.size() <= 4 &&
                      std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
  const long value = digits ? std::strtol(text.c_str(), nullptr, 10) : -1;
  if (value < 0 || value > kMaxRestartsLimit) {
    return InvalidError("TrainJob/" + job.name + ": metadata.annotations[" +
                        std::string(kMaxRestartsAnnotation) + "]: must be an integer from 0 to " +
                        std::to_string(kMaxRestartsLimit) + ", got \"" + text + "\"");
  }
  return static_cast<uint32_t>(value);
}

int64_t JobController::DeadlineMs(const Job& job) {
  if (!job.spec.active_deadline_seconds) return INT64_MAX;
  const int64_t seconds = std::max<int64_t>(0, *job.spec.active_deadline_seconds);
  // Far-future deadlines (the CRD allows any int64) must not overflow.
  if (seconds > (INT64_MAX - job.record.status.created_unix_ms()) / 1000) return INT64_MAX;
  return job.record.status.created_unix_ms() + seconds * 1000;
}

void JobController::EnforceDeadlines(int64_t now_ms) {
  for (const auto& name : order_) {
    Job& job = *jobs_.at(name);
    v1::JobStatus& st = job.record.status;
    if (IsTerminal(PhaseOf(st)) || st.deleting() || now_ms < DeadlineMs(job)) continue;
    const std::string cause = "activeDeadlineSeconds (" +
                              std::to_string(*job.spec.active_deadline_seconds) +
                              " s since the job was created) exceeded";
    EndAttemptRecord(st, AttemptTrigger::kFailed, cause, now_ms);
    StopAttempt(job, "deadline exceeded");
    Transition(job, static_cast<int>(JobTrigger::kDeadlineExceeded), "DeadlineExceeded",
               cause + "; every rank is stopped", now_ms);
  }
}

Result<JobController::SuspendFlip> JobController::PrepareSuspend(Job& job, bool suspend,
                                                                  std::string spec_yaml,
                                                                  const std::string& how,
                                                                  int64_t now_ms) const {
  const v1::JobStatus& st = job.record.status;
  const JobPhase phase = PhaseOf(st);
  const std::string verb = suspend ? "suspended" : "resumed";
  if (IsTerminal(phase)) {
    return InvalidError("trainjob/" + st.name() + " is " + JobPhaseName(phase) +
                        ": a finished job cannot be " + verb);
  }
  if (st.deleting()) {
    return InvalidError("trainjob/" + st.name() + " is being deleted: it cannot be " + verb);
  }
  SuspendFlip flip{&job, suspend, std::move(spec_yaml), st};
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

Status JobController::StoreSuspend(const SuspendFlip& flip) {
  const std::string& name = flip.job->record.name;
  TRAINLET_RETURN_IF_ERROR(store_->UpdateSpec(name, flip.spec_yaml));
  return store_->UpdateStatus(name, flip.status);
}

void JobController::CommitSuspend(SuspendFlip flip) {
  Job& job = *flip.job;
  job.record.spec_yaml = flip.spec_yaml;
  job.spec.yaml = std::move(flip.spec_yaml);
  job.spec.suspend = flip.suspend;
  job.record.status = std::move(flip.status);
  if (flip.suspend) {
    StopAttempt(job, "trainjob suspended");
  } else {
    job.not_before_ms = 0;  // a resume is not a restart: no backoff
  }
  ++generation_;
  spdlog::info("trainjob/{} is {}", job.record.name, JobPhaseName(PhaseOf(job.record.status)));
}

Result<std::optional<JobController::SuspendFlip>> JobController::CompareWithStored(
    Job& job, const trainjob::TrainJob& spec, const std::string& source, int64_t now_ms) const {
  if (job.record.spec_yaml == spec.yaml) return std::optional<SuspendFlip>();
  TRAINLET_ASSIGN_OR_RETURN(std::string stored, WithoutSuspend(job.record.spec_yaml));
  TRAINLET_ASSIGN_OR_RETURN(std::string applied, WithoutSuspend(spec.yaml));
  if (stored != applied) {
    return Status(ErrorCode::kExists,
                  "trainjob/" + spec.name +
                      " already exists with a different spec (only spec.suspend may change); "
                      "delete it first (trainletctl delete trainjob " + spec.name + ")");
  }
  // The same job; "suspend: false" written out where it was absent is no change.
  if (spec.suspend == job.spec.suspend) return std::optional<SuspendFlip>();
  TRAINLET_ASSIGN_OR_RETURN(
      SuspendFlip flip,
      PrepareSuspend(job, spec.suspend, spec.yaml,
                     "apply of " + (source.empty() ? std::string("stdin") : source), now_ms));
  return std::optional<SuspendFlip>(std::move(flip));
}

Result<v1::SuspendJobResult> JobController::SetSuspend(const std::string& name, bool suspend,
                                                       int64_t now_ms) {
  auto it = jobs_.find(name);
  if (it == jobs_.end()) return NotFoundError("trainjob/" + name + " not found");
  Job& job = *it->second;
  v1::SuspendJobResult result;
  result.set_name(name);
  if (job.spec.suspend != suspend) {
    // A resume is new work, refused on a failing disk as apply is; a suspend only stops work.
    if (!suspend && options_.min_free_bytes > 0) {
      TRAINLET_RETURN_IF_ERROR(store_->CheckSpace(options_.min_free_bytes));
    }
    TRAINLET_ASSIGN_OR_RETURN(std::string spec_yaml, WithSuspend(job.record.spec_yaml, suspend));
    TRAINLET_ASSIGN_OR_RETURN(
        SuspendFlip flip,
        PrepareSuspend(job, suspend, std::move(spec_yaml),
                       std::string("trainletctl ") + (suspend ? "suspend" : "resume"), now_ms));
    TRAINLET_RETURN_IF_ERROR(store_->Transaction([&] { return StoreSuspend(flip); }));
    CommitSuspend(std::move(flip));
    result.set_changed(true);
    if (!suspend) Schedule(now_ms);
  }
  result.set_job_phase(static_cast<v1::JobPhase>(PhaseOf(job.record.status)));
  return result;
}

}  // namespace trainlet::coordinator
