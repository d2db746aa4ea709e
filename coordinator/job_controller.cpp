#include "coordinator/job_controller.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <climits>
#include <set>

#include "coordinator/apply_limits.h"
#include "coordinator/apply_transaction.h"
#include "coordinator/attempt_plan.h"
#include "coordinator/gang_planner.h"
#include "coordinator/job_state_machine.h"
#include "coordinator/node_reconcile.h"
#include "coordinator/rank_event_fold.h"
#include "coordinator/rank_state_machine.h"

namespace trainlet::coordinator {
JobController::JobController(JobStore* store, NodeRegistry* registry, NodeSink* sink,
                             JobControllerOptions options)
    : store_(store),
      registry_(registry),
      options_(options),
      agents_(sink),
      exec_(registry, {options_.exec_endpoint, options_.server_public_key, options_.stop_grace_ms},
            [this](const std::string& job) { return Find(job); }),
      port_waits_(&agents_, [this](const std::string& job, uint32_t attempt) {
        return exec_.AttemptActive(job, attempt);
      }) {}

Status JobController::Load(const std::string& runtimes_dir) {
  TRAINLET_RETURN_IF_ERROR(runtimes_.LoadShipped(runtimes_dir));
  TRAINLET_RETURN_IF_ERROR(runtimes_.LoadStored(*store_));
  TRAINLET_ASSIGN_OR_RETURN(auto stored_jobs, store_->ListJobs());
  for (auto& rec : stored_jobs) {
    auto spec = trainjob::ParseDocuments(rec.spec_yaml);
    auto rt = trainjob::ParseDocuments(rec.runtime_yaml);
    if (!spec.ok() || spec->jobs.size() != 1 || !rt.ok() || rt->runtimes.size() != 1) {
      spdlog::error("stored trainjob/{} no longer parses; left untouched in the store", rec.name);
      continue;
    }
    std::vector<std::string> warnings;
    auto job = BuildJobEntry(spec->jobs[0], rt->runtimes[0], EntryOptions(), warnings);
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

JobEntryOptions JobController::EntryOptions() const {
  return {options_.stop_grace_ms, options_.select_plugin};
}

void JobController::Adopt(std::unique_ptr<Job> job) {
  const std::string name = job->record.name;
  exec_.Track(name, job->plan_template.env);
  order_.push_back(name);
  jobs_[name] = std::move(job);
}

Result<v1::ApplyResult> JobController::Apply(const std::string& yaml, const std::string& source,
                                             int64_t now_ms) {
  auto parsed = trainjob::ParseDocuments(yaml);
  if (!parsed.ok()) {
    return InvalidError((source.empty() ? "" : source + ": ") + parsed.status().message());
  }
  TRAINLET_RETURN_IF_ERROR(CheckApplySizes(*parsed, source));
  return Apply(std::move(parsed).value(), source, now_ms);
}

Result<v1::ApplyResult> JobController::Apply(trainjob::ParsedFile parsed, const std::string& source,
                                             int64_t now_ms) {
  TRAINLET_ASSIGN_OR_RETURN(ApplyTransaction tx, ApplyTransaction::Prepare(
                                                     std::move(parsed), source, now_ms, runtimes_,
                                                     [this](const std::string& name) -> const Job* {
                                                       auto it = jobs_.find(name);
                                                       return it == jobs_.end() ? nullptr
                                                                                : it->second.get();
                                                     },
                                                     EntryOptions()));
  // All or nothing, and memory changes only after the store has everything.
  TRAINLET_RETURN_IF_ERROR(tx.Store(*store_, options_.min_free_bytes));
  v1::ApplyResult result = std::move(tx.result);
  for (auto& flip : tx.flips) {
    result.add_configured("trainjob/" + flip.job);
    CommitSuspend(std::move(flip));
  }
  runtimes_.Commit(std::move(tx.staged), result);
  for (auto& job : tx.new_jobs) {
    result.add_created("trainjob/" + job->record.name);
    Adopt(std::move(job));
  }
  for (auto& w : tx.warnings) result.add_warnings(std::move(w));
  ++generation_;
  Schedule(now_ms);
  return result;
}

std::map<std::string, uint32_t> JobController::UsedSlots() const {
  std::map<std::string, uint32_t> used;
  // Whatever the job's phase, a rank that has not ended holds its slot: the ranks of a Failed or
  // Restarting attempt keep running until their stop takes effect.
  for (const auto& [name, job] : jobs_) {
    for (const auto& r : job->record.status.ranks()) {
      if (!RankEnded(r)) ++used[r.node()];
    }
  }
  return used;
}

void JobController::Schedule(int64_t now_ms) {
  last_schedule_ms_ = now_ms;
  // A delete whose last store write failed is finished here once the store takes it.
  for (const auto& name : std::vector<std::string>(order_)) {
    if (jobs_.at(name)->record.status.deleting()) MaybeFinishDelete(name);
  }
  EnforceDeadlines(now_ms);
  EnforceStartTimeouts(now_ms);
  auto used = UsedSlots();
  auto used_resources = UsedResources();
  for (const auto& name : order_) {
    Job& job = *jobs_.at(name);
    const JobPhase p = PhaseOf(job.record.status);
    if ((p != JobPhase::kPending && p != JobPhase::kRestarting) || job.plugin == nullptr ||
        job.record.status.deleting() || now_ms < job.not_before_ms) {
      continue;
    }
    {
      // The old attempt's ranks (of a failed attempt, or one stopped by a suspend) must all be
      // gone first: two attempts never run at once.
      const bool old_alive =
          std::any_of(job.record.status.ranks().begin(), job.record.status.ranks().end(),
                      [](const auto& r) { return !RankEnded(r); });
      if (old_alive) continue;
    }
    TryPlace(job, used, used_resources, now_ms);
  }
}

bool JobController::TryPlace(Job& job, std::map<std::string, uint32_t>& used,
                             std::map<std::string, Resources>& used_resources, int64_t now_ms) {
  v1::JobStatus& st = job.record.status;
  GangRequest gang = job.gang;
  gang.num_nodes = st.num_nodes();
  gang.slots_per_node = job.procs_per_node;
  auto placement = PlaceGang(gang, NodeCapacities(*registry_, used, used_resources));
  if (!placement.ok()) {
    const std::string reason = "Unschedulable: " + placement.status().message();
    if (st.reason() != reason) Transition(job, JobTrigger::kUnplaceable, reason, "", now_ms);
    return false;
  }
  PlanRequest req = job.plan_template;
  req.attempt = st.attempt() + 1;
  for (const auto& n : placement->nodes) {
    const NodeEntry* e = registry_->Find(n);
    PlacedNode& placed = req.nodes.emplace_back();
    placed.name = n;
    placed.address = e->info.address();
    placed.hostname = e->info.hostname();
    placed.topology = e->info.topology();
  }
  // The layout checks the request and lays out the ranks without ports (attempt_plan.h). A
  // refusal means nothing was placed or sent: the job, not an attempt, fails, and it is never
  // retried (the same spec would be refused the same way).
  auto refuse = [&](const Status& why) {
    Transition(job, JobTrigger::kPlanRefused, "PlanRefused",
               "the " + std::string(job.plugin->name()) +
                   " runtime cannot plan this job: " + why.message(),
               now_ms);
    return false;
  };
  auto layout = LayoutAttempt(*job.plugin, req);
  if (!layout.ok()) return refuse(layout.status());
  LauncherSecret secret;  // held here and by ExecAuthority, never in the request
  if (layout->exec_launcher_rank) {
    auto issued = exec_.IssueLauncherKeys(req);
    if (!issued.ok()) {
      FailAttempt(job, issued.status().message(), now_ms);
      return false;
    }
    secret = std::move(*issued);
  }
  // A runtime that needs ports is rendered once the nodes hold them (job_ports.cpp), others now.
  std::vector<v1::LaunchPlan> plans;
  if (!WantsPorts(*layout)) {
    auto rendered = RenderAttempt(*job.plugin, req, *layout, secret);
    if (!rendered.ok()) return refuse(rendered.status());
    plans = std::move(*rendered);
  }
  const v1::JobStatus before = st;  // what stays if the placement cannot be stored
  RecordAttempt(job, req, placement->nodes, *layout, secret, now_ms);
  for (const auto& n : placement->nodes) {
    used[n] += job.procs_per_node;
    if (!job.gang.resources.empty()) used_resources[n] += job.gang.resources;
  }
  // The attempt is durable before any agent hears of it. When the store refuses it (a full or
  // read-only disk), nobody hears of it: the job stays as it was and is placed again later.
  if (Status s = Flush(); !s.ok()) {
    spdlog::error("trainjob/{}: attempt {} not started, the store refused it: {}", job.record.name,
                  req.attempt, s.message());
    st = before;
    exec_.SetLauncherSecret(job.record.name, "");
    job.dirty = true;  // whatever else was unflushed still is
    for (const auto& n : placement->nodes) {
      used[n] -= job.procs_per_node;
      if (!job.gang.resources.empty()) used_resources[n] -= job.gang.resources;
    }
    ++generation_;
    return false;
  }
  // A runtime that needs ports (MASTER_PORT, ring ports) is rendered once the nodes hold them.
  if (port_waits_.Begin(job.record.name, req, *layout)) return true;
  for (size_t i = 0; i < plans.size(); ++i) {
    agents_.LaunchPlan(placement->nodes[i], std::move(plans[i]));
  }
  return true;
}

void JobController::RecordAttempt(Job& job, const PlanRequest& req,
                                  const std::vector<std::string>& nodes,
                                  const AttemptLayout& layout, const LauncherSecret& secret,
                                  int64_t now_ms) {
  v1::JobStatus& st = job.record.status;
  st.set_attempt(req.attempt);
  st.set_launcher_key(req.launcher_public_key);
  st.set_launch_mode(job.plugin->LaunchMode(req));
  exec_.SetLauncherSecret(job.record.name, secret.z85);
  st.clear_placement();
  st.clear_ranks();
  for (const auto& n : nodes) st.add_placement(n);
  for (size_t i = 0; i < layout.nodes.size(); ++i) {
    for (const LaidOutRank& w : layout.nodes[i].ranks) {
      auto* r = st.add_ranks();
      r->set_rank(w.rank);
      r->set_local_rank(w.local_rank);
      r->set_node(nodes[i]);
      r->set_rank_state(v1::RANK_STATE_PENDING);  // kRankTransitions moves it from here
      r->set_attempt(req.attempt);
    }
  }
  std::sort(st.mutable_ranks()->begin(), st.mutable_ranks()->end(),
            [](const auto& a, const auto& b) { return a.rank() < b.rank(); });
  auto* rec = st.add_attempts();
  rec->set_attempt(req.attempt);
  for (const auto& r : st.ranks()) rec->add_rank_nodes(r.node());
  rec->set_started_unix_ms(now_ms);
  std::string where;
  for (const auto& n : nodes) where += (where.empty() ? "" : ", ") + n;
  Transition(job, JobTrigger::kPlaced, "",
             "attempt " + std::to_string(req.attempt) + " placed on " + where, now_ms);
}

void JobController::Transition(Job& job, JobTrigger trigger, const std::string& reason,
                               const std::string& message, int64_t now_ms) {
  Status s = ApplyTransition(job.record.status, trigger, reason, message, now_ms);
  if (!s.ok()) {
    spdlog::error("trainjob/{}: {}", job.record.name, s.message());
    return;
  }
  spdlog::info("trainjob/{} is {}{}{}", job.record.name, JobPhaseName(PhaseOf(job.record.status)),
               reason.empty() ? "" : ": ", reason);
  MarkDirty(job);
}

void JobController::MarkDirty(Job& job) {
  job.dirty = true;
  ++generation_;
}

void JobController::StopAttempt(Job& job, const std::string& reason) {
  const v1::JobStatus& st = job.record.status;
  std::set<std::string> nodes;
  for (const auto& r : st.ranks()) {
    if (!RankEnded(r)) nodes.insert(r.node());
  }
  for (const auto& n : nodes) agents_.StopWorkers(n, job.record.name, st.attempt(), reason);
  EndPortWait(job);
}

void JobController::FailAttempt(Job& job, const std::string& cause, int64_t now_ms) {
  v1::JobStatus& st = job.record.status;
  if (st.attempts_size() > 0) {
    auto* rec = st.mutable_attempts(st.attempts_size() - 1);
    if (AttemptEnded(*rec)) return;  // this attempt already ended
    TRAINLET_CHECK(ApplyAttemptTrigger(*rec, AttemptTrigger::kFailed).ok());
    rec->set_cause(cause);
    rec->set_ended_unix_ms(now_ms);
  }
  StopAttempt(job, cause);
  // Failed attempts before this one; an attempt stopped by a suspend does not count.
  const auto failed = std::count_if(st.attempts().begin(), st.attempts().end(), [](const auto& a) {
    return a.attempt_result() == v1::ATTEMPT_RESULT_FAILED;
  });
  const uint32_t restarts_used = failed > 0 ? static_cast<uint32_t>(failed - 1) : 0;
  if (restarts_used < st.max_restarts()) {
    const auto delay =
        RestartBackoff(restarts_used, options_.restart_backoff, options_.max_restart_backoff);
    job.not_before_ms = now_ms + delay.count();
    Transition(job, JobTrigger::kAttemptFailed, "AttemptFailed",
               "attempt " + std::to_string(st.attempt()) + " failed: " + cause +
                   "; restarting in " + std::to_string(delay.count()) + " ms",
               now_ms);
  } else {
    Transition(job, JobTrigger::kAttemptFailedFinal, "BackoffLimitExceeded",
               "attempt " + std::to_string(st.attempt()) + " failed: " + cause +
                   (st.max_restarts() == 0
                        ? ""
                        : " (restart limit " + std::to_string(st.max_restarts()) + " reached)"),
               now_ms);
  }
}

void JobController::OnWorkerEvent(const std::string& node, const v1::WorkerEvent& ev,
                                  int64_t now_ms) {
  auto it = jobs_.find(ev.job());
  v1::JobStatus* st = it == jobs_.end() ? nullptr : &it->second->record.status;
  const RankEventFold fold = FoldWorkerEvent(st, node, ev);
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
    MaybeFinishDelete(job.record.name);
    return;
  }
  const std::string ranks = std::to_string(st->ranks_size());
  switch (fold.outcome) {
    case RankEventFold::Outcome::kNone:
      break;
    case RankEventFold::Outcome::kFailed:
      FailAttempt(job, fold.cause, now_ms);
      break;
    case RankEventFold::Outcome::kAllSucceeded: {
      auto* rec = st->mutable_attempts(st->attempts_size() - 1);
      TRAINLET_CHECK(ApplyAttemptTrigger(*rec, AttemptTrigger::kAllRanksSucceeded).ok());
      rec->set_ended_unix_ms(now_ms);
      Transition(job, JobTrigger::kAllRanksSucceeded, "Succeeded",
                 "all " + ranks + " ranks exited 0", now_ms);
      break;
    }
    case RankEventFold::Outcome::kAllStarted:
      Transition(job, JobTrigger::kAllRanksStarted, "Running", "all " + ranks + " ranks started",
                 now_ms);
      break;
  }
}

void JobController::ReconcileNode(
    const std::string& node, const google::protobuf::RepeatedPtrField<v1::RunningWorker>& running,
    int64_t now_ms) {
  const NodeReconcile plan =
      ReconcileRunning(node, running, [this](const std::string& job, uint32_t attempt) {
        return AttemptActive(job, attempt) ? Find(job) : nullptr;
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
  port_waits_.Resend(node);
  (void)now_ms;
}

std::set<std::string> JobController::PlacedNodes() const {
  std::set<std::string> nodes;
  for (const auto& [name, job] : jobs_) {
    if (!AttemptActive(name, job->record.status.attempt())) continue;
    for (const auto& r : job->record.status.ranks()) {
      if (!RankEnded(r)) nodes.insert(r.node());
    }
  }
  return nodes;
}

void JobController::OnNodeLost(const std::string& node, int64_t now_ms, int64_t hold_until_ms) {
  const std::vector<std::string> names = order_;  // a finished delete edits order_
  for (const auto& name : names) {
    Job& job = *jobs_.at(name);
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
      MaybeFinishDelete(name);
      continue;
    }
    const JobPhase p = PhaseOf(job.record.status);
    if (p == JobPhase::kStarting || p == JobPhase::kRunning) {
      FailAttempt(job, "node " + node + " lost", now_ms);
      job.not_before_ms = std::max(job.not_before_ms, hold_until_ms);
    }
  }
}

Result<v1::DeleteJobResult> JobController::Delete(const std::string& name, int64_t now_ms) {
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
    ev->set_message("delete requested; stopping every rank");
    TRAINLET_RETURN_IF_ERROR(store_->UpdateStatus(name, deleting));
    job.record.status = std::move(deleting);
    StopAttempt(job, "trainjob deleted");
    ++generation_;
  }
  MaybeFinishDelete(name);
  return result;
}

void JobController::MaybeFinishDelete(std::string name) {
  auto it = jobs_.find(name);
  if (it == jobs_.end() || !it->second->record.status.deleting()) return;
  const auto& ranks = it->second->record.status.ranks();
  if (!std::all_of(ranks.begin(), ranks.end(), RankEnded)) return;
  if (Status s = store_->DeleteJob(name); !s.ok()) {
    spdlog::error("cannot delete trainjob/{} from the store: {}", name, s.message());
    return;
  }
  jobs_.erase(it);
  exec_.Forget(name);
  port_waits_.Forget(name);
  order_.erase(std::remove(order_.begin(), order_.end(), name), order_.end());
  ++generation_;
  spdlog::info("trainjob/{} deleted", name);
}

Status JobController::Flush() {
  bool any = false;
  for (const auto& [name, job] : jobs_) any = any || job->dirty;
  if (!any) return Status::Ok();
  TRAINLET_RETURN_IF_ERROR(store_->Transaction([&]() -> Status {
    for (auto& [name, job] : jobs_) {
      if (job->dirty) TRAINLET_RETURN_IF_ERROR(store_->UpdateStatus(name, job->record.status));
    }
    return Status::Ok();
  }));
  // Only now: a failed transaction wrote nothing, so every job stays dirty for the next try.
  for (auto& [name, job] : jobs_) job->dirty = false;
  return Status::Ok();
}

int64_t JobController::NextWakeMs() const {
  int64_t next = INT64_MAX;
  for (const auto& [name, job] : jobs_) {
    const auto& st = job->record.status;
    if (!IsTerminal(PhaseOf(st)) && !st.deleting())
      next = std::min(next, ActiveDeadlineMs(job->spec, st.created_unix_ms()));
    next = std::min(next, StartDeadlineMs(st, options_.start_timeout));
    // Only a backoff still to come is timed work; a restart waiting for its old ranks to exit, or
    // for room, is woken by those events instead.
    if (PhaseOf(st) != JobPhase::kRestarting || job->not_before_ms <= last_schedule_ms_) continue;
    if (std::all_of(st.ranks().begin(), st.ranks().end(), RankEnded)) {
      next = std::min(next, job->not_before_ms);
    }
  }
  return next;
}

bool JobController::AttemptActive(const std::string& job, uint32_t attempt) const {
  return exec_.AttemptActive(job, attempt);
}

std::map<std::string, std::string> JobController::LauncherKeys() const {
  return exec_.LauncherKeys();
}

Result<ExecTarget> JobController::ResolveExec(const std::string& launcher_key,
                                              const std::string& host) const {
  return exec_.ResolveExec(launcher_key, host);
}

const v1::JobStatus* JobController::Find(const std::string& name) const {
  auto it = jobs_.find(name);
  return it == jobs_.end() ? nullptr : &it->second->record.status;
}

std::vector<const v1::JobStatus*> JobController::List() const {
  std::vector<const v1::JobStatus*> out;
  for (const auto& name : order_) out.push_back(&jobs_.at(name)->record.status);
  return out;
}

}  // namespace trainlet::coordinator
