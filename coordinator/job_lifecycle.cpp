// JobController's lifecycle steps beside placement: active deadlines (and the warning before
// them), suspend, resume and preemption. The rules they apply are in lifecycle_rules.h. Split from
// job_controller.cpp by responsibility; same class, same loop.
#include <spdlog/spdlog.h>

#include <climits>

#include "coordinator/job_controller.h"
#include "coordinator/job_state_machine.h"

namespace trainlet::coordinator {

void JobController::EnforceDeadlines(int64_t now_ms) {
  for (Job* entry : order_) {
    Job& job = *entry;
    v1::JobStatus& st = job.record.status;
    if (!job.spec.active_deadline_seconds) continue;
    // The ranks hear of the deadline its warning's grace before it, so they can checkpoint; the
    // job still fails at the deadline. Annotations were checked at apply: a bad one is no warning.
    // The warned attempt is stored: it is warned once, and its end is the deadline's.
    const StopWarning warning = JobStopWarning(job.spec, options_.preemption_grace);
    if (now_ms >= DeadlineWarningMs(job.spec, st, warning,
                                    DeadlineWarningWanted(job.spec, options_.deadline_warning))) {
      st.set_deadline_warned_attempt(st.attempt());
      MarkDirty(job);
      if (launcher_.Warn(job, warning, "activeDeadlineSeconds is near")) {
        AppendEvent(st, "Warning", "DeadlineWarning",
                    WarningMessage(warning, "activeDeadlineSeconds is near"), now_ms);
      }
    }
    if (IsTerminal(PhaseOf(st)) || st.deleting() ||
        now_ms < ActiveDeadlineMs(job.spec, st.created_unix_ms()))
      continue;
    const std::string cause = "activeDeadlineSeconds (" +
                              std::to_string(*job.spec.active_deadline_seconds) +
                              " s since the job was created) exceeded";
    EndAttemptRecord(st, AttemptTrigger::kFailed, cause, now_ms);
    launcher_.Stop(job, "deadline exceeded");
    Transition(job, JobTrigger::kDeadlineExceeded, "DeadlineExceeded",
               cause + "; every rank is stopped", now_ms);
  }
}

void JobController::EndAfterDeadlineWarning(Job& job, const std::string& how, int64_t now_ms) {
  v1::JobStatus& st = job.record.status;
  const std::string cause = "attempt " + std::to_string(st.attempt()) +
                            " ended after its warning before activeDeadlineSeconds (" +
                            std::to_string(job.spec.active_deadline_seconds.value_or(0)) +
                            " s): " + how;
  EndAttemptRecord(st, AttemptTrigger::kFailed, cause, now_ms);
  launcher_.Stop(job, "deadline exceeded");
  Transition(job, JobTrigger::kDeadlineExceeded, "DeadlineExceeded",
             cause +
                 "; a job that ends after its deadline warning is stopped by its deadline, "
                 "and not restarted",
             now_ms);
}

void JobController::NoteFinished(Job& job, int64_t now_ms) {
  v1::JobStatus& st = job.record.status;
  if (!IsTerminal(PhaseOf(st)) || st.finished_unix_ms() != 0) return;
  st.set_finished_unix_ms(now_ms);
  st.set_ttl_delete_unix_ms(TtlDeleteMs(job.runtime, options_.finished_job_ttl, now_ms));
}

void JobController::EnforceTtl(int64_t now_ms) {
  std::vector<std::string> due;  // Delete may erase from order_
  for (const Job* job : order_) {
    const v1::JobStatus& st = job->record.status;
    if (st.ttl_delete_unix_ms() != 0 && now_ms >= st.ttl_delete_unix_ms() && !st.deleting() &&
        IsTerminal(PhaseOf(st))) {
      due.push_back(job->record.name);
    }
  }
  for (const auto& name : due) {
    spdlog::info("trainjob/{}: ttlSecondsAfterFinished has passed since it finished: deleting it",
                 name);
    // A refused store write leaves the job as it was; the next pass tries again.
    if (auto deleted = Delete(name, now_ms, "ttlSecondsAfterFinished"); !deleted.ok()) {
      spdlog::error("trainjob/{}: cannot delete it: {}", name, deleted.status().message());
    }
  }
}

void JobController::CommitSuspend(SuspendFlip flip) {
  Job& job = *jobs_.at(flip.job);
  job.record.spec_yaml = flip.spec_yaml;
  job.spec.yaml = std::move(flip.spec_yaml);
  job.spec.suspend = flip.suspend;
  job.record.status = std::move(flip.status);
  if (flip.suspend) {
    launcher_.Stop(job, flip.warning.signal != 0 ? "trainjob preempted" : "trainjob suspended",
                   flip.warning);
  } else {
    job.not_before_ms = 0;  // a resume is not a restart: no backoff
  }
  ++generation_;
  spdlog::info("trainjob/{} is {}", job.record.name, JobPhaseName(PhaseOf(job.record.status)));
}

Result<v1::SuspendJobResult> JobController::SetSuspend(const std::string& name, bool suspend,
                                                       int64_t now_ms, const std::string& by) {
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
        PrepareSuspend(job.record.status, suspend, std::move(spec_yaml),
                       (by.empty() ? std::string() : by + " (") + "trainletctl " +
                           (suspend ? "suspend" : "resume") + (by.empty() ? "" : ")"),
                       now_ms));
    flip.job = name;
    TRAINLET_RETURN_IF_ERROR(store_->Transaction([&] { return StoreSuspend(*store_, flip); }));
    CommitSuspend(std::move(flip));
    result.set_changed(true);
    if (!suspend) Schedule(now_ms);
  }
  result.set_job_phase(static_cast<v1::JobPhase>(PhaseOf(job.record.status)));
  return result;
}

}  // namespace trainlet::coordinator

namespace trainlet::coordinator {

Result<v1::SuspendJobResult> JobController::Preempt(const std::string& key,
                                                    const std::string& by_text, int64_t now_ms) {
  auto it = jobs_.find(key);
  if (it == jobs_.end()) return NotFoundError("trainjob/" + key + " not found");
  Job& job = *it->second;
  TRAINLET_ASSIGN_OR_RETURN(const StopWarning warning,
                            StopWarningOf(job.spec, options_.preemption_grace));
  TRAINLET_ASSIGN_OR_RETURN(std::string spec_yaml, WithSuspend(job.record.spec_yaml, true));
  TRAINLET_ASSIGN_OR_RETURN(
      SuspendFlip flip,
      PreparePreemption(job.record.status, std::move(spec_yaml), by_text, warning, now_ms));
  flip.job = key;
  TRAINLET_RETURN_IF_ERROR(store_->Transaction([&] { return StoreSuspend(*store_, flip); }));
  spdlog::info("trainjob/{}: preempted by {}", key, by_text);
  CommitSuspend(std::move(flip));
  v1::SuspendJobResult result;
  result.set_name(key);
  result.set_changed(true);
  result.set_job_phase(static_cast<v1::JobPhase>(PhaseOf(job.record.status)));
  return result;
}

}  // namespace trainlet::coordinator
