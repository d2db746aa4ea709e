// JobController's progress steps: taking agents' ProgressReports into the jobs' status, and the
// stall rule each Schedule applies. The rules themselves are pure (job_progress.h); this file
// applies them to the job map. Split from job_controller.cpp by responsibility; same class, same
// loop.
#include <spdlog/spdlog.h>

#include "coordinator/job_controller.h"
#include "coordinator/job_state_machine.h"

namespace trainlet::coordinator {

std::vector<ProgressFoldResult> JobController::OnProgressReport(const std::string& node,
                                                                const v1::ProgressReport& report,
                                                                int64_t now_ms) {
  std::vector<ProgressFoldResult> results;
  results.reserve(report.updates_size());
  for (const v1::JobProgress& update : report.updates()) {
    auto it = jobs_.find(update.job());
    v1::JobStatus* st = it == jobs_.end() ? nullptr : &it->second->record.status;
    const ProgressFoldResult r = FoldProgress(st, node, update, now_ms);
    results.push_back(r);
    if (r == ProgressFoldResult::kTaken) {
      progress_.OnTaken(update.job());
    } else {
      spdlog::debug("dropped progress of {} attempt {} from node {}: {}", update.job(),
                    update.attempt(), node, ProgressFoldResultName(r));
    }
  }
  // The stall rule sees the update now (a Stalled job resumes at once); the write waits for its
  // turn (kProgressWriteInterval).
  EnforceProgress(now_ms);
  return results;
}

void JobController::EnforceProgress(int64_t now_ms) {
  for (size_t i = 0; i < order_.size(); ++i) {  // by index: nothing here adds or erases jobs
    Job& job = *order_[i];
    const std::string& name = job.record.name;
    v1::JobStatus& st = job.record.status;
    if (progress_.TakeWriteDue(name, now_ms)) job.dirty = true;  // no generation: no phase change
    if (PhaseOf(st) != JobPhase::kRunning || st.deleting()) continue;
    const int64_t since = progress_.SeeRunning(name, st.attempt(), now_ms);
    const StallVerdict verdict = JudgeStall(st, job.stall, since, now_ms);
    switch (verdict.action) {
      case StallVerdict::Action::kNone:
        break;
      case StallVerdict::Action::kStalled:
        spdlog::warn("trainjob/{} is stalled: {}", name, verdict.message);
        SetCondition(st, kConditionStalled, true, kReasonProgressTimeout, verdict.message, now_ms);
        AppendEvent(st, "Warning", "Stalled", verdict.message, now_ms);
        MarkDirty(job);
        if (job.stall.restart) FailAttempt(job, "Stalled: " + verdict.message, now_ms);
        break;
      case StallVerdict::Action::kResumed:
        spdlog::info("trainjob/{} is no longer stalled: {}", name, verdict.message);
        SetCondition(st, kConditionStalled, false, kReasonProgressResumed, verdict.message, now_ms);
        AppendEvent(st, "Normal", std::string(kReasonProgressResumed), verdict.message, now_ms);
        MarkDirty(job);
        break;
    }
  }
}

}  // namespace trainlet::coordinator
