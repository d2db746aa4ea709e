#include "coordinator/job_controller.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <climits>
#include <optional>
#include <set>

#include "coordinator/apply_limits.h"
#include "coordinator/apply_transaction.h"
#include "coordinator/attempt_plan.h"
#include "coordinator/fair_share_history.h"
#include "coordinator/flavor_constraint.h"
#include "coordinator/gang_planner.h"
#include "coordinator/job_key.h"
#include "coordinator/job_state_machine.h"
#include "coordinator/node_reconcile.h"
#include "coordinator/queue_in_use.h"
#include "coordinator/rank_event_fold.h"
#include "coordinator/rank_state_machine.h"
#include "coordinator/working_dir.h"

namespace trainlet::coordinator {
JobController::JobController(JobStore* store, NodeRegistry* registry, NodeSink* sink,
                             JobControllerOptions options)
    : store_(store),
      registry_(registry),
      options_(options),
      entry_options_{options_.stop_grace_ms, options_.select_plugin},
      agents_(sink),
      exec_(registry, {options_.exec_endpoint, options_.server_public_key, options_.stop_grace_ms},
            [this](const std::string& job) { return Find(job); }),
      launcher_(registry, &exec_, &agents_, this,
                AttemptLauncher::Options{options_.start_timeout, options_.check_run_as}) {}

Status JobController::Load(const std::string& runtimes_dir) {
  TRAINLET_RETURN_IF_ERROR(runtimes_.LoadShipped(runtimes_dir));
  TRAINLET_RETURN_IF_ERROR(runtimes_.LoadStored(*store_));
  TRAINLET_RETURN_IF_ERROR(queues_.LoadStored(*store_));
  TRAINLET_ASSIGN_OR_RETURN(std::string history, store_->GetClusterValue(kFairShareHistoryKey));
  if (auto h = DecodeUsageHistory(history); h.ok()) {
    admission_.admitter().RestoreHistory(std::move(h).value());
  } else {
    // Only fair sharing's ordering depends on it: start again from the current usage.
    spdlog::warn("{}; fair sharing starts again from the current usage", h.status().message());
  }
  TRAINLET_RETURN_IF_ERROR(missed_purges_.Load());  // purges that wait for their nodes
  TRAINLET_ASSIGN_OR_RETURN(auto stored_jobs, store_->ListJobs());
  for (auto& rec : stored_jobs) {
    auto spec = trainjob::ParseDocuments(rec.spec_yaml);
    auto rt = trainjob::ParseDocuments(rec.runtime_yaml);
    if (!spec.ok() || spec->jobs.size() != 1 || !rt.ok() || rt->runtimes.size() != 1) {
      spdlog::error("stored trainjob/{} no longer parses; left untouched in the store", rec.name);
      continue;
    }
    std::vector<std::string> warnings;
    auto job = BuildJobEntry(spec->jobs[0], rt->runtimes[0], entry_options_, warnings);
    if (!job.ok()) {
      spdlog::error("stored trainjob/{}: {}", rec.name, job.status().message());
      continue;
    }
    (*job)->record = std::move(rec);
    Adopt(std::move(job).value());
  }
  spdlog::info("loaded {} runtimes and {} jobs", runtimes_.size(), jobs_.size());
  return Status::Ok();
}

void JobController::Adopt(std::unique_ptr<Job> job) {
  const std::string name = job->record.name;
  exec_.Track(name, job->plan_template.env, job->plan_template.run_as_user,
              job->plan_template.run_as_group, job->plan_template.allow_privilege_escalation,
              job->plan_template.fs_group);
  if (!job->record.status.launcher_key().empty()) exec_.NoteStoredLauncherKey(name);
  TRAINLET_CHECK_MSG(jobs_.find(name) == jobs_.end(), "trainjob/" + name + " adopted twice");
  order_.push_back(job.get());
  jobs_.emplace(name, std::move(job));
}

Result<v1::ApplyResult> JobController::Apply(const std::string& yaml, const std::string& source,
                                             int64_t now_ms, const std::string& by) {
  TRAINLET_ASSIGN_OR_RETURN(trainjob::ParsedFile parsed,
                            ApplyTransaction::Parse(yaml, source, Held()));
  return Apply(std::move(parsed), source, now_ms, by);
}

ApplyTransaction::HeldJob JobController::Held() const {
  return [this](const std::string& name) -> const Job* {
    auto it = jobs_.find(name);
    return it == jobs_.end() ? nullptr : it->second.get();
  };
}

Result<v1::ApplyResult> JobController::Apply(trainjob::ParsedFile parsed, const std::string& source,
                                             int64_t now_ms, const std::string& by) {
  TRAINLET_ASSIGN_OR_RETURN(ApplyTransaction tx,
                            ApplyTransaction::Prepare(std::move(parsed), source, now_ms, runtimes_,
                                                      Held(), entry_options_, &queues_));
  for (auto& job : tx.new_jobs) {  // who applied it, and whether they may ask its uids and gids
    job->record.status.set_applied_by(by);
    if (options_.check_run_as) TRAINLET_RETURN_IF_ERROR(options_.check_run_as(*job, by));
  }
  if (!by.empty()) {
    // Who applied: the Created event of each new job, and the Suspended/Resumed event a re-apply
    // adds last.
    for (auto& job : tx.new_jobs) {
      for (auto& ev : *job->record.status.mutable_events()) {
        if (ev.reason() == "Created") ev.set_message(ev.message() + " by " + by);
      }
    }
    for (auto& flip : tx.flips) {
      auto* events = flip.status.mutable_events();
      if (!events->empty()) {
        auto& ev = (*events)[events->size() - 1];
        ev.set_message(ev.message() + " (user " + by + ")");
      }
    }
  }
  // All or nothing, and memory changes only after the store has everything. One WAL sync for the
  // apply and the placement of its jobs (group commit): the apply's commit is written without a
  // sync of its own; a placement in the pass below is stored with a synced commit, which syncs
  // the apply's frames before it (the WAL is one file, synced whole), and only then are plans
  // sent; else Sync below syncs before the caller answers "created". So, as before, nothing
  // outside hears of a write before it is durable (bench/README.md, issue 16).
  TRAINLET_RETURN_IF_ERROR(tx.Store(*store_, options_.min_free_bytes, /*defer_sync=*/true));
  v1::ApplyResult result = std::move(tx.result);
  for (auto& flip : tx.flips) {
    result.add_configured("trainjob/" + JobDisplayName(flip.job));
    CommitSuspend(std::move(flip));
  }
  runtimes_.Commit(std::move(tx.staged), result);
  queues_.Commit(std::move(tx.queues), result);
  for (auto& job : tx.new_jobs) {
    result.add_created("trainjob/" + JobDisplayName(job->record.name));
    Adopt(std::move(job));
  }
  for (auto& w : tx.warnings) result.add_warnings(std::move(w));
  ++generation_;
  Schedule(now_ms);
  // A failed sync cannot be retried: the kernel may have dropped the pages it failed to write and
  // report the next sync OK. The apply is in memory but maybe not on disk, so it must not be
  // acknowledged, nor its jobs placed later from memory: stop, and start again from what the disk
  // holds (as PostgreSQL does since 2018). Nothing acknowledged depended on this sync.
  const Status synced = store_->Sync();
  TRAINLET_CHECK_MSG(synced.ok(), "store: an apply could not be made durable: " + synced.message());
  return result;
}

void JobController::Schedule(int64_t now_ms) {
  // Not re-entered: an admission resumes a preempted job through SetSuspend, which schedules;
  // the pass already under way places it.
  if (scheduling_) return;
  scheduling_ = true;
  struct Done {
    bool& flag;
    ~Done() { flag = false; }
  } done{scheduling_};
  last_schedule_ms_ = now_ms;
  // A delete whose last store write failed is finished here once the store takes it.
  std::vector<std::string> deleting;  // MaybeFinishDelete may erase from order_
  for (const Job* job : order_) {
    if (job->record.status.deleting()) deleting.push_back(job->record.name);
  }
  for (const auto& name : deleting) MaybeFinishDelete(name, now_ms);
  EnforceDeadlines(now_ms);
  EnforceTtl(now_ms);  // job_lifecycle.cpp: finished jobs whose ttlSecondsAfterFinished passed
  for (Job* job : order_) {
    launcher_.EnforceStartTimeout(*job, now_ms);
    launcher_.ResendLostPlans(*job, now_ms);  // plans lost to a crash or a disconnection
    launcher_.RebuildHeld(*job, now_ms);      // workers held when the coordinator restarted
  }
  EnforceProgress(now_ms);         // job_progress_steps.cpp: stalls, coalesced progress writes
  admission_.Run(order_, now_ms);  // admission_step.h: with queues, only admitted jobs go on
  // Kueue's resource-in-use finalizer (queue_in_use.h): a Terminating ResourceFlavor or
  // ClusterQueue goes once nothing uses it; looked at again only when a job or queue changed.
  if (queues_.terminating_count() > 0 && (generation_ != queue_deletes_seen_.first ||
                                          queues_.generation() != queue_deletes_seen_.second)) {
    if (FinishUnusedQueueDeletes(queues_, *store_, List(), now_ms).failed == 0) {
      queue_deletes_seen_ = {generation_, queues_.generation()};
    }
  }
  // What placed jobs hold, once per pass and only once some job waits to be placed: a pass runs
  // on every loop turn, so with 1,000 nodes heartbeating and no job to place, building the room
  // each time was most of the coordinator's CPU (issue 17: a new leader registering 1,000 agents).
  // Place keeps it current (issue 19, defect 1).
  std::optional<PassCapacity> room;
  for (Job* entry : order_) {
    Job& job = *entry;
    const JobPhase p = PhaseOf(job.record.status);
    if ((p != JobPhase::kPending && p != JobPhase::kRestarting) || job.plugin == nullptr ||
        job.record.status.deleting() || now_ms < job.not_before_ms ||
        now_ms < job.record.status.lost_node_hold_unix_ms() ||
        !admission_.MayPlace(job.record.status)) {
      continue;  // (waits in its queue, or for its admission checks)
    }
    if (!room) {
      const NodeUsage usage = Usage();
      room.emplace(*registry_, usage.slots, usage.resources);
    }
    if (job.unplaced_room == room->Fingerprint()) continue;  // no room last time, and the same
    {
      // The old attempt's ranks (of a failed attempt, or one stopped by a suspend) must all be
      // gone first: two attempts never run at once.
      const bool old_alive =
          std::any_of(job.record.status.ranks().begin(), job.record.status.ranks().end(),
                      [](const auto& r) { return !RankEnded(r); });
      if (old_alive) continue;
    }
    // Only on the nodes of the flavors its admission gave it (flavor_constraint.h).
    launcher_.Place(job, *room, now_ms, FlavorConstraintOf(job.record.status, queues_));
  }
}

void JobController::Transition(Job& job, JobTrigger trigger, const std::string& reason,
                               const std::string& message, int64_t now_ms) {
  Status s = ApplyTransition(job.record.status, trigger, reason, message, now_ms);
  job.unplaced_room = 0;  // its request or its turn may have changed: try it again
  if (!s.ok()) {
    spdlog::error("trainjob/{}: {}", job.record.name, s.message());
    return;
  }
  // The message too: what an Unschedulable job needs, why an attempt failed.
  spdlog::info("trainjob/{} is {}{}{}{}{}", job.record.name,
               JobPhaseName(PhaseOf(job.record.status)), reason.empty() ? "" : ": ", reason,
               message.empty() ? "" : ": ", message);
  NoteFinished(job, now_ms);  // job_lifecycle.cpp: the finish time, and ttlSecondsAfterFinished
  MarkDirty(job);
}

JobEntry* JobController::FindJob(const std::string& key) {
  auto it = jobs_.find(key);
  return it == jobs_.end() ? nullptr : it->second.get();
}

Result<v1::SuspendJobResult> JobController::ResumeAdmitted(const std::string& key,
                                                           const std::string& by, int64_t now_ms) {
  return SetSuspend(key, false, now_ms, by);
}

Result<v1::Kueue14AdmitCheckResult> JobController::AdmitCheck(const std::string& key,
                                                              const std::string& check,
                                                              int64_t now_ms,
                                                              const std::string& by) {
  auto result = admission_.AdmitCheck(key, check, now_ms, by);
  if (result.ok() && result->changed()) Schedule(now_ms);  // the last check: placed now
  return result;
}

void JobController::MarkDirty(Job& job) {
  job.dirty = true;
  ++generation_;
}

void JobController::FailAttempt(Job& job, const std::string& cause, int64_t now_ms,
                                FailureKind kind) {
  AttemptFailure failure;  // no one worker failed: only rules without targets match
  failure.message = cause;
  FailAttempt(job, failure, now_ms, kind);
}

void JobController::FailAttempt(Job& job, const AttemptFailure& failure, int64_t now_ms,
                                FailureKind kind) {
  v1::JobStatus& st = job.record.status;
  const std::string& cause = failure.message;
  v1::AttemptRecord* rec = nullptr;
  if (st.attempts_size() > 0) {
    rec = st.mutable_attempts(st.attempts_size() - 1);
    if (AttemptEnded(*rec)) return;  // this attempt already ended
    TRAINLET_CHECK(ApplyAttemptTrigger(*rec, AttemptTrigger::kFailed).ok());
    rec->set_cause(cause);
    rec->set_ended_unix_ms(now_ms);
    rec->set_infrastructure(kind == FailureKind::kInfrastructure);
  }
  launcher_.Stop(job, cause);
  if (kind == FailureKind::kInfrastructure) return RetryForInfrastructure(job, cause, now_ms);
  // Restarts used before this failure; an attempt stopped by a suspend, failed for the
  // infrastructure, or restarted by a rule that ignores maxRestarts, does not count
  // (failure_rules.h).
  const uint32_t restarts_used = RestartsUsed(st);
  // The policy was checked at apply (BuildJobEntry); one that no longer parses is the default.
  const Result<RestartPolicy> policy = RestartPolicyOf(job.spec);
  const FailureDecision decision =
      DecideFailure(job.runtime.failure_rules, policy.ok() ? *policy : RestartPolicy::kOnFailure,
                    failure, restarts_used, st.max_restarts());
  if (rec != nullptr) rec->set_failure_rule(decision.rule);
  const std::string fired = decision.rule.empty() ? "" : " (failure rule " + decision.rule + ")";
  if (decision.action != FailureDecision::Action::kFail) {
    const auto delay =
        RestartBackoff(restarts_used, options_.restart_backoff, options_.max_restart_backoff);
    job.not_before_ms = now_ms + delay.count();
    Transition(job, JobTrigger::kAttemptFailed, "AttemptFailed",
               "attempt " + std::to_string(st.attempt()) + " failed: " + cause + fired +
                   "; restarting in " + std::to_string(delay.count()) + " ms",
               now_ms);
  } else {
    Transition(job, JobTrigger::kAttemptFailedFinal,
               decision.limit_reached ? "BackoffLimitExceeded" : "FailedByFailureRule",
               "attempt " + std::to_string(st.attempt()) + " failed: " + cause + fired +
                   (!decision.limit_reached || st.max_restarts() == 0
                        ? ""
                        : " (restart limit " + std::to_string(st.max_restarts()) + " reached)"),
               now_ms);
  }
}

void JobController::RetryForInfrastructure(Job& job, const std::string& cause, int64_t now_ms) {
  v1::JobStatus& st = job.record.status;
  const uint32_t tries = st.infrastructure_retries();
  st.set_infrastructure_retries(tries + 1);
  // Bounded: past the limit each retry waits the longest backoff, and says why.
  const bool waiting = tries >= options_.max_infrastructure_retries;
  const auto delay =
      waiting ? options_.max_restart_backoff
              : RestartBackoff(tries, options_.restart_backoff, options_.max_restart_backoff);
  job.not_before_ms = now_ms + delay.count();
  Transition(
      job, JobTrigger::kAttemptFailed, waiting ? "WaitingForInfrastructure" : "AttemptFailed",
      "attempt " + std::to_string(st.attempt()) + " failed for the infrastructure: " + cause +
          "; not counted against maxRestarts (" + std::to_string(tries + 1) +
          " in a row); restarting in " + std::to_string(delay.count()) + " ms",
      now_ms);
}

void JobController::OnWorkerEvent(const std::string& node, const v1::WorkerEvent& ev,
                                  int64_t now_ms) {
  auto it = jobs_.find(ev.job());
  v1::JobStatus* st = it == jobs_.end() ? nullptr : &it->second->record.status;
  const RankEventFold fold = FoldWorkerEvent(st, node, ev, now_ms);
  if (fold.effect == RankEventFold::Effect::kStale) {
    // A rank of a deleted job or of an older attempt: it must not run.
    if (ev.kind() == v1::WorkerEvent::KIND_STARTED) {
      agents_.StopWorkers(node, ev.job(), ev.attempt(), "stale attempt");
    }
    return;
  }
  if (fold.effect != RankEventFold::Effect::kFolded) return;
  Job& job = *it->second;
  MarkDirty(job);
  if (st->deleting()) {
    MaybeFinishDelete(job.record.name, now_ms);
    return;
  }
  const std::string ranks = std::to_string(st->ranks_size());
  switch (fold.outcome) {
    case RankEventFold::Outcome::kNone:
      launcher_.ReleaseSteps(job);  // dependencies met on every node (step_release.h)
      break;
    case RankEventFold::Outcome::kFailed: {
      if (DeadlineWarned(*st)) {  // no failure rule: the deadline ended it
        EndAfterDeadlineWarning(job, fold.cause, now_ms);
        break;
      }
      // The failed worker, for the failure rules (its replicated job, exit code or signal).
      const auto& ranks = st->ranks();
      auto failed = std::find_if(ranks.begin(), ranks.end(),
                                 [&](const auto& r) { return r.rank() == ev.rank(); });
      AttemptFailure failure;
      if (failed != ranks.end()) failure = FailureOfRank(*failed, fold.cause);
      failure.message = fold.cause;
      FailAttempt(job, failure, now_ms);
      break;
    }
    case RankEventFold::Outcome::kAllSucceeded: {
      if (DeadlineWarned(*st)) {
        EndAfterDeadlineWarning(job, "all " + ranks + " ranks exited 0", now_ms);
        break;
      }
      auto* rec = st->mutable_attempts(st->attempts_size() - 1);
      TRAINLET_CHECK(ApplyAttemptTrigger(*rec, AttemptTrigger::kAllRanksSucceeded).ok());
      rec->set_ended_unix_ms(now_ms);
      Transition(job, JobTrigger::kAllRanksSucceeded, "Succeeded",
                 "all " + ranks + " ranks exited 0", now_ms);
      break;
    }
    case RankEventFold::Outcome::kAllStarted:
      st->set_infrastructure_retries(0);  // the infrastructure delivered this one
      Transition(job, JobTrigger::kAllRanksStarted, "Running", "all " + ranks + " ranks started",
                 now_ms);
      break;
  }
}

void JobController::OnPortsReserved(const std::string& node, const v1::PortsReserved& reserved,
                                    int64_t now_ms) {
  auto it = jobs_.find(reserved.job());
  launcher_.OnPortsReserved(node, reserved, it == jobs_.end() ? nullptr : it->second.get(), now_ms);
}

void JobController::ReconcileNode(
    const std::string& node, const google::protobuf::RepeatedPtrField<v1::RunningWorker>& running,
    int64_t now_ms) {
  // Data of jobs deleted while it was away.
  missed_purges_.OnRegistered(node, now_ms,
                              [this](const std::string& j) { return Find(j) != nullptr; });
  const NodeReconcile plan =
      ReconcileRunning(node, running, [this](const std::string& job, uint32_t attempt) {
        return exec_.AttemptActive(job, attempt) ? Find(job) : nullptr;
      });
  for (const auto& a : plan.adopt) {
    Job& job = *jobs_.at(a.job);
    v1::RankStatus& r = *job.record.status.mutable_ranks(a.rank_index);
    TRAINLET_CHECK(ApplyRankTrigger(r, RankTrigger::kStarted).ok());
    r.set_pid(a.pid);
    MarkDirty(job);
  }
  for (const auto& [job, attempt] : plan.stop) {
    spdlog::warn("node {} runs {} attempt {}, which is not current: stopping it", node, job,
                 attempt);
    agents_.StopWorkers(node, job, attempt, "stale attempt found when the node registered");
  }
  launcher_.ResendPortAsks(node);
  for (Job* job : order_) launcher_.ResendReleases(*job, node);
  (void)now_ms;
}

namespace {

// Raises the job's stored hold, never lowers it; written with the failure that set it.
void HoldUntil(JobEntry& job, int64_t until_ms) {
  if (until_ms > job.record.status.lost_node_hold_unix_ms()) {
    job.record.status.set_lost_node_hold_unix_ms(until_ms);
  }
}

}  // namespace

void JobController::OnNodeLost(const std::string& node, int64_t now_ms, int64_t hold_until_ms) {
  // A copy: a finished delete erases from order_ (only the job it finishes, which is not
  // looked at again).
  const std::vector<Job*> jobs = order_;
  for (Job* entry : jobs) {
    Job& job = *entry;
    const std::string name = job.record.name;
    bool touched = false;
    for (auto& r : *job.record.status.mutable_ranks()) {
      if (r.node() == node && !RankEnded(r)) {
        TRAINLET_CHECK(ApplyRankTrigger(r, RankTrigger::kNodeLost).ok());
        r.set_message("node " + node + " lost");
        touched = true;
      }
    }
    if (!touched) continue;
    MarkDirty(job);
    if (job.record.status.deleting()) {
      MaybeFinishDelete(name, now_ms);
      continue;
    }
    const JobPhase p = PhaseOf(job.record.status);
    if (p == JobPhase::kStarting || p == JobPhase::kRunning) {
      // Its failure names the replicated jobs whose workers went with it (failure rules' targets).
      const auto lost = [](const v1::RankStatus& r) {
        return r.rank_state() == v1::RANK_STATE_LOST;
      };
      FailAttempt(job, FailureOnNode(job.record.status, node, lost, "node " + node + " lost"),
                  now_ms, FailureKind::kInfrastructure);
      HoldUntil(job, hold_until_ms);
    } else {
      // Already being stopped (Restarting after a drain --force, Suspended after a preemption):
      // the lost node may still run its ranks in their warning grace, then their stop grace. No
      // next attempt starts before both have passed: two attempts never run at once.
      const StopWarning warning = JobStopWarning(job.spec, options_.preemption_grace);
      HoldUntil(job, hold_until_ms + warning.grace_ms);
    }
  }
}

std::vector<std::string> JobController::FailJobsOnNode(const std::string& node,
                                                       const std::string& cause, int64_t now_ms) {
  std::vector<std::string> failed;
  for (const auto& name : Usage().JobsOn(node)) {
    Job& job = *jobs_.at(name);
    const JobPhase phase = PhaseOf(job.record.status);
    if (job.record.status.deleting() ||
        (phase != JobPhase::kStarting && phase != JobPhase::kRunning)) {
      continue;  // already stopping; its ranks end on their own
    }
    spdlog::warn("trainjob/{}: failing attempt {}: {}", name, job.record.status.attempt(), cause);
    // The replicated jobs the drain takes down, before the stop moves their ranks on.
    const AttemptFailure failure = FailureOnNode(
        job.record.status, node, [](const v1::RankStatus& r) { return !RankEnded(r); }, cause);
    // The ranks get the job's warning first (lifecycle_rules.h); FailAttempt's stop keeps it.
    const StopWarning warning = JobStopWarning(job.spec, options_.preemption_grace);
    launcher_.Stop(job, cause, warning);
    AppendEvent(job.record.status, "Warning", "DrainWarning", WarningMessage(warning, cause),
                now_ms);
    FailAttempt(job, failure, now_ms);
    failed.push_back(name);
  }
  return failed;
}

NodeUsage JobController::Usage() const {
  return UsageOf(std::vector<const Job*>(order_.begin(), order_.end()));
}

Result<v1::DeleteJobResult> JobController::Delete(const std::string& name, int64_t now_ms,
                                                  const std::string& by, bool force) {
  auto it = jobs_.find(name);
  if (it == jobs_.end()) return NotFoundError("trainjob/" + name + " not found");
  Job& job = *it->second;
  v1::DeleteJobResult result;
  result.set_name(name);
  if (!job.record.status.deleting()) {
    // Memory changes only once the store has it: a refused write leaves the job as it was.
    v1::JobStatus deleting = job.record.status;
    deleting.set_deleting(true);
    auto* ev = deleting.add_events();
    ev->set_unix_ms(now_ms);
    ev->set_type("Normal");
    ev->set_reason("Deleting");
    ev->set_message("delete requested" + (by.empty() ? std::string() : " by " + by) +
                    "; stopping every rank");
    if (!by.empty()) spdlog::info("trainjob/{}: delete requested by {}", name, by);
    TRAINLET_RETURN_IF_ERROR(store_->UpdateStatus(name, deleting));
    job.record.status = std::move(deleting);
    launcher_.Stop(job, "trainjob deleted");
    ++generation_;
  }
  if (force) deletes_.Force(name);  // delete_gate.h: no wait for any rank
  MaybeFinishDelete(name, now_ms);
  return result;
}

void JobController::MaybeFinishDelete(std::string name, int64_t now_ms) {
  auto it = jobs_.find(name);
  if (it == jobs_.end() || !it->second->record.status.deleting()) return;
  // Every rank ended, and a Lost one's node confirmed it (delete_gate.h), unless forced.
  const DeleteGate::Decision gate = deletes_.Decide(name, it->second->record.status);
  if (!gate.finish) {
    if (DeleteGate::NoteWaiting(it->second->record.status, gate.waiting_for, now_ms)) {
      MarkDirty(*it->second);
    }
    return;
  }
  // The job's data goes with it on every node that ran any attempt of it (issue 19, defect 9),
  // and its shared dir; the tombstones of nodes away now are stored before the job goes.
  const v1::JobStatus& gone = it->second->record.status;
  const auto place = WorkDirPlaceOf(it->second->spec.annotations);
  if (Status s = missed_purges_.Purge(name, gone.uid(), NodesThatRan(gone), now_ms,
                                      place.ok() && *place == WorkDirPlace::kShared);
      !s.ok()) {
    spdlog::error("cannot store the purges of trainjob/{}: {}", name, s.message());
    return;
  }
  if (Status s = store_->DeleteJob(name); !s.ok()) {
    spdlog::error("cannot delete trainjob/{} from the store: {}", name, s.message());
    return;
  }
  std::erase(order_, it->second.get());
  jobs_.erase(it);
  exec_.Forget(name);
  launcher_.Forget(name);
  progress_.Forget(name);
  deletes_.Forget(name);
  ++generation_;
  spdlog::info("trainjob/{} deleted", name);
}

Status JobController::Flush() {
  std::vector<Job*> dirty;
  for (auto& [name, job] : jobs_) {
    if (job->dirty) dirty.push_back(job.get());
  }
  // Each job's status stands alone, so they are written in transactions of at most
  // kFlushBatch: etcd refuses a transaction of more than 128 operations by default, and a flush
  // of every job after a mass event (a node with 500 ranks lost) must not fail whole, every tick.
  for (size_t first = 0; first < dirty.size(); first += kFlushBatch) {
    const size_t end = std::min(dirty.size(), first + kFlushBatch);
    TRAINLET_RETURN_IF_ERROR(store_->Transaction([&]() -> Status {
      for (size_t i = first; i < end; ++i) {
        TRAINLET_RETURN_IF_ERROR(
            store_->UpdateStatus(dirty[i]->record.name, dirty[i]->record.status));
      }
      return Status::Ok();
    }));
    // Only now: a failed transaction wrote nothing, so its jobs and later ones stay dirty for the
    // next try.
    for (size_t i = first; i < end; ++i) dirty[i]->dirty = false;
  }
  return Status::Ok();
}

int64_t JobController::NextWakeMs() const {
  int64_t next = progress_.NextWriteMs();
  for (const auto& [name, job] : jobs_) {
    const auto& st = job->record.status;
    if (!IsTerminal(PhaseOf(st)) && !st.deleting())
      next = std::min(next, ActiveDeadlineMs(job->spec, st.created_unix_ms()));
    if (job->spec.active_deadline_seconds) {  // the warning before it (job_lifecycle.cpp)
      next = std::min(next, DeadlineWarningMs(
                                job->spec, st, JobStopWarning(job->spec, options_.preemption_grace),
                                DeadlineWarningWanted(job->spec, options_.deadline_warning)));
    }
    next = std::min(next, StartDeadlineMs(st, options_.start_timeout));
    // A TTL not yet acted on; one whose delete the store refused is retried by the next pass,
    // not by a loop that spins on a time already past.
    if (st.ttl_delete_unix_ms() > last_schedule_ms_ && !st.deleting())
      next = std::min(next, st.ttl_delete_unix_ms());
    next =
        std::min(next, StallDeadlineMs(st, job->stall, progress_.RunningSince(name, st.attempt())));
    if (st.lost_node_hold_unix_ms() > last_schedule_ms_ && !IsTerminal(PhaseOf(st))) {
      next = std::min(next, st.lost_node_hold_unix_ms());  // a lost node's hold ends
    }
    // Only a backoff still to come is timed work; a restart waiting for its old ranks to exit, or
    // for room, is woken by those events instead.
    if (PhaseOf(st) != JobPhase::kRestarting || job->not_before_ms <= last_schedule_ms_) continue;
    if (std::all_of(st.ranks().begin(), st.ranks().end(), RankEnded)) {
      next = std::min(next, job->not_before_ms);
    }
  }
  return next;
}

const v1::JobStatus* JobController::Find(const std::string& name) const {
  auto it = jobs_.find(name);
  return it == jobs_.end() ? nullptr : &it->second->record.status;
}

std::vector<const v1::JobStatus*> JobController::List() const {
  std::vector<const v1::JobStatus*> out;
  for (const Job* job : order_) out.push_back(&job->record.status);
  return out;
}

}  // namespace trainlet::coordinator
