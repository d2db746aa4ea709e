#include "coordinator/attempt_launcher.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>

#include "coordinator/attempt_steps.h"
#include "coordinator/gang_planner.h"
#include "coordinator/lifecycle_rules.h"
#include "coordinator/placement_inputs.h"
#include "coordinator/rank_state_machine.h"
#include "coordinator/work_dir_agreement.h"

namespace trainlet::coordinator {
namespace {

bool NotEnded(const v1::RankStatus& r) { return !RankEnded(r); }

}  // namespace

AttemptLauncher::AttemptLauncher(const NodeRegistry* registry, ExecAuthority* exec,
                                 AgentCommands* agents, Owner* owner, Options options)
    : registry_(registry),
      exec_(exec),
      agents_(agents),
      owner_(owner),
      options_(options),
      port_waits_(agents, [exec](const std::string& job, uint32_t attempt) {
        return exec->AttemptActive(job, attempt);
      }) {}

bool AttemptLauncher::Place(JobEntry& job, PassCapacity& room, int64_t now_ms,
                            const Result<FlavorConstraint>& flavor) {
  v1::JobStatus& st = job.record.status;
  GangRequest gang = job.gang;
  gang.num_nodes = st.num_nodes();
  gang.slots_per_node = job.procs_per_node;
  if (flavor.ok()) gang.flavor = *flavor;
  auto placement = flavor.ok() ? room.Place(gang) : Result<Placement>(flavor.status());
  if (!placement.ok()) {
    // The reason a script can test; what the job needs, in the message (as events and
    // conditions split them).
    const std::string& needs = placement.status().message();
    if (st.reason() != "Unschedulable" || st.message() != needs) {
      owner_->Transition(job, JobTrigger::kUnplaceable, "Unschedulable", needs, now_ms);
    }
    job.unplaced_room = room.Fingerprint();
    return false;
  }
  PlanRequest req = job.plan_template;
  req.attempt = st.attempt() + 1;
  // What the ranks are told of the attempt before (TRAINLET_PREEMPTED, TRAINLET_RESTART_REASON).
  for (auto& kv : RestartEnv(st)) req.env.push_back(std::move(kv));
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
    owner_->Transition(job, JobTrigger::kPlanRefused, "PlanRefused",
                       "the " + std::string(job.plugin->name()) +
                           " runtime cannot plan this job: " + why.message(),
                       now_ms);
    return false;
  };
  // The access policy may have changed since the job was applied (access_policy_run_as.h).
  if (options_.check_run_as) {
    if (Status s = options_.check_run_as(job, st.applied_by()); !s.ok()) {
      owner_->Transition(job, JobTrigger::kPlanRefused, "RunAsNotAllowed", s.message(), now_ms);
      return false;
    }
  }
  auto layout = LayoutAttempt(*job.plugin, req);
  if (!layout.ok()) return refuse(layout.status());
  // The runtime's other replicated jobs run beside the plugin's ranks (attempt_steps.h).
  auto steps = StepsOf(job.spec, job.runtime);
  if (!steps.ok()) return refuse(steps.status());
  LauncherSecret secret;  // held here and by ExecAuthority, never in the request
  if (layout->exec_launcher_rank) {
    auto issued = exec_->IssueLauncherKeys(req);
    if (!issued.ok()) {
      owner_->FailAttempt(job, issued.status().message(), now_ms);
      return false;
    }
    secret = std::move(*issued);
  }
  // A runtime that needs ports is rendered once the nodes hold them (LaunchWithPorts), others now.
  // With a checkpoint to compare, the nodes report their work dirs first (work_dir_agreement.h).
  const std::string checkpoint = CheckpointToCompare(req);
  std::vector<v1::LaunchPlan> plans;
  if (!WantsPorts(*layout) && checkpoint.empty()) {
    auto rendered = RenderAttempt(*job.plugin, req, *layout, secret);
    if (!rendered.ok()) return refuse(rendered.status());
    plans = std::move(*rendered);
    AddStepsToPlans(*steps, *layout, plans);
    for (auto& plan : plans) plan.set_job_uid(st.uid());  // the incarnation (job_data_purge.h)
  }
  const v1::JobStatus before = st;  // what stays if the placement cannot be stored
  RecordAttempt(job, req, placement->nodes, *layout, *steps, secret, now_ms);
  if (auto mixed = MixedAttemptsWarning(st, req, placement->nodes, *layout); !mixed.empty()) {
    AppendEvent(st, "Warning", "MixedWorkDirs", mixed, now_ms);
  }
  // The attempt is durable before any agent hears of it. When the store refuses it (a full or
  // read-only disk), nobody hears of it: the job stays as it was and is placed again later.
  if (Status s = owner_->Flush(); !s.ok()) {
    spdlog::error("trainjob/{}: attempt {} not started, the store refused it: {}", job.record.name,
                  req.attempt, s.message());
    st = before;
    exec_->SetLauncherSecret(job.record.name, "");
    owner_->MarkDirty(job);  // whatever else was unflushed still is
    return false;
  }
  room.Charge(placement->nodes, job.procs_per_node, job.gang.resources);
  // A runtime that needs ports (MASTER_PORT, ring ports) is rendered once the nodes hold them.
  resend_to_.erase(job.record.name);
  rebuilding_.erase(job.record.name);
  if (port_waits_.Begin(job.record.name, req, *layout, checkpoint, st.uid())) {
    // The asks count as sends: one lost while the node stays connected is asked again.
    for (const std::string& node : port_waits_.Unanswered(job.record.name, req.attempt)) {
      delivery_.Tried(job.record.name, req.attempt, node, now_ms);
    }
    return true;
  }
  releases_.Hold(job.record.name, req.attempt, placement->nodes, plans);  // step_release.h
  for (size_t i = 0; i < plans.size(); ++i)
    SendPlan(placement->nodes[i], std::move(plans[i]), now_ms);
  return true;
}

void AttemptLauncher::ReleaseSteps(JobEntry& job) {
  for (auto& [node, plan] : releases_.Release(job.record.status)) {
    spdlog::info("trainjob/{}: dependencies met on every node, starting {} worker(s) on {}",
                 job.record.name, plan.workers_size(), node);
    agents_->LaunchPlan(node, std::move(plan));
  }
}

void AttemptLauncher::ResendReleases(JobEntry& job, const std::string& node) {
  for (auto& plan : releases_.Unstarted(job.record.status, node)) {
    agents_->LaunchPlan(node, std::move(plan));
  }
}

void AttemptLauncher::RecordAttempt(JobEntry& job, const PlanRequest& req,
                                    const std::vector<std::string>& nodes,
                                    const AttemptLayout& layout, const AttemptSteps& steps,
                                    const LauncherSecret& secret, int64_t now_ms) {
  v1::JobStatus& st = job.record.status;
  st.set_attempt(req.attempt);
  st.set_launcher_key(req.launcher_public_key);
  st.set_launch_mode(job.plugin->LaunchMode(req));
  exec_->SetLauncherSecret(job.record.name, secret.z85);
  st.clear_placement();
  st.clear_ranks();
  st.clear_trainer_status();  // the old attempt's progress says nothing of the new one
  // Only the first attempt after a preemption is told of it; a plan made again for it says the
  // same (Replan).
  st.set_attempt_follows_preemption(st.preempted());
  st.set_preempted(false);
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
  AddStepRanks(steps, layout, nodes, req.attempt, st);
  std::sort(st.mutable_ranks()->begin(), st.mutable_ranks()->end(),
            [](const auto& a, const auto& b) { return a.rank() < b.rank(); });
  auto* rec = st.add_attempts();
  rec->set_attempt(req.attempt);
  for (const auto& r : st.ranks()) rec->add_rank_nodes(r.node());
  rec->set_started_unix_ms(now_ms);
  std::string where;
  for (const auto& n : nodes) where += (where.empty() ? "" : ", ") + n;
  owner_->Transition(job, JobTrigger::kPlaced, "",
                     "attempt " + std::to_string(req.attempt) + " placed on " + where, now_ms);
}

void AttemptLauncher::OnPortsReserved(const std::string& node, const v1::PortsReserved& reserved,
                                      JobEntry* job, int64_t now_ms) {
  std::string why;
  switch (port_waits_.Record(node, reserved, &why)) {
    case PortReservationWaits::Outcome::kDropped:
    case PortReservationWaits::Outcome::kWaiting:
      return;
    case PortReservationWaits::Outcome::kRefused:
      TRAINLET_CHECK(job != nullptr);  // a wait is forgotten with its job
      // The refusing node's workers fail (failure rules' targetReplicatedJobs).
      owner_->FailAttempt(*job, FailureOnNode(job->record.status, node, NotEnded, why), now_ms);
      return;
    case PortReservationWaits::Outcome::kComplete:
      TRAINLET_CHECK(job != nullptr);
      if (FailIfWorkDirsDiverge(*job, now_ms)) return;
      LaunchWithPorts(*job, now_ms);
      return;
  }
}

bool AttemptLauncher::FailIfWorkDirsDiverge(JobEntry& job, int64_t now_ms) {
  v1::JobStatus& st = job.record.status;
  const PlanRequest* req = port_waits_.Request(job.record.name, st.attempt());
  TRAINLET_CHECK(req != nullptr);
  std::vector<std::string> nodes;
  for (const auto& n : req->nodes) nodes.push_back(n.name);
  const auto why = DivergentWorkDirs(port_waits_.Checkpoint(job.record.name, st.attempt()), nodes,
                                     port_waits_.WorkDirStates(job.record.name, st.attempt()));
  if (!why) return false;
  // No restart: the next attempt would find the same work dirs. No rank has started.
  if (st.attempts_size() > 0) {
    auto* rec = st.mutable_attempts(st.attempts_size() - 1);
    if (ApplyAttemptTrigger(*rec, AttemptTrigger::kFailed).ok()) {
      rec->set_cause(*why);
      rec->set_ended_unix_ms(now_ms);
    }
  }
  Stop(job, "the nodes' work dirs diverge");  // gives back the ports they hold
  owner_->Transition(job, JobTrigger::kAttemptFailedFinal, "DivergentWorkDirs", *why, now_ms);
  return true;
}

void AttemptLauncher::LaunchWithPorts(JobEntry& job, int64_t now_ms) {
  const std::string& name = job.record.name;
  const uint32_t attempt = job.record.status.attempt();
  const PlanRequest* waited = port_waits_.Request(name, attempt);
  const AttemptLayout* layout = port_waits_.Layout(name, attempt);
  TRAINLET_CHECK(waited != nullptr && layout != nullptr);
  const PlanRequest& req = *waited;
  // RenderAttempt checks that the plans hold exactly the ranks stored from the layout.
  auto plans = RenderAttempt(*job.plugin, req, *layout, exec_->SecretOf(name));
  // The steps were checked when the attempt was placed, from the same spec and runtime.
  auto steps = StepsOf(job.spec, job.runtime);
  if (plans.ok() && !steps.ok()) plans = steps.status();
  if (!plans.ok()) {
    owner_->FailAttempt(
        job,
        FailureOfRanks(job.record.status, NotEnded,
                       "planning with the reserved ports failed: " + plans.status().message()),
        now_ms);
    return;
  }
  AddStepsToPlans(*steps, *layout, *plans);
  for (auto& plan : *plans) plan.set_job_uid(job.record.status.uid());
  std::vector<std::string> nodes;
  for (const auto& n : req.nodes) nodes.push_back(n.name);
  port_waits_.End(name, attempt);     // `req` and `layout` go with it
  if (rebuilding_.erase(name) > 0) {  // RebuildHeld's: nothing goes out but what it releases
    HoldRebuilt(job, std::move(*plans));
    return;
  }
  // A plan rendered again (Replan) goes only to the nodes that missed it.
  std::vector<std::string> only;
  if (auto it = resend_to_.find(name); it != resend_to_.end()) {
    only = std::move(it->second);
    resend_to_.erase(it);
  }
  if (only.empty()) {
    releases_.Hold(name, attempt, nodes, *plans);  // step_release.h
  } else {
    HoldAgain(name, attempt, nodes, *plans);  // Replan's
  }
  spdlog::info("trainjob/{}: ports reserved, sending the plans of attempt {}", name, attempt);
  for (size_t i = 0; i < plans->size(); ++i) {
    if (!only.empty() && std::find(only.begin(), only.end(), nodes[i]) == only.end()) continue;
    SendPlan(nodes[i], std::move((*plans)[i]), now_ms);
  }
}

void AttemptLauncher::SendPlan(const std::string& node, v1::LaunchPlan plan, int64_t now_ms) {
  delivery_.Sent(node, plan, now_ms);
  agents_->LaunchPlan(node, std::move(plan));
}

void AttemptLauncher::Stop(JobEntry& job, const std::string& reason, const StopWarning& warning) {
  const v1::JobStatus& st = job.record.status;
  std::set<std::string> nodes;
  for (const auto& r : st.ranks()) {
    if (!RankEnded(r)) nodes.insert(r.node());
  }
  for (const auto& n : nodes) {
    agents_->StopWorkers(n, job.record.name, st.attempt(), reason, warning);
  }
  EndPortWait(job);
  if (releases_.EndHeld(job.record.status)) owner_->MarkDirty(job);  // never sent: end here
}

bool AttemptLauncher::Warn(JobEntry& job, const StopWarning& warning, const std::string& reason) {
  const v1::JobStatus& st = job.record.status;
  if (warning.signal == 0) return false;
  std::set<std::string> nodes;
  for (const auto& r : st.ranks()) {
    if (!RankEnded(r)) nodes.insert(r.node());
  }
  if (nodes.empty()) return false;
  for (const auto& n : nodes) {
    agents_->WarnWorkers(n, job.record.name, st.attempt(), reason, warning.signal);
  }
  return true;
}

void AttemptLauncher::EndPortWait(JobEntry& job) {
  v1::JobStatus& st = job.record.status;
  rebuilding_.erase(job.record.name);
  if (!port_waits_.End(job.record.name, st.attempt())) return;
  for (auto& r : *st.mutable_ranks()) {
    if (r.rank_state() != v1::RANK_STATE_PENDING) continue;
    TRAINLET_CHECK(ApplyRankTrigger(r, RankTrigger::kAttemptStopped).ok());
    r.set_message("never started: the attempt ended while its nodes reserved ports");
  }
  owner_->MarkDirty(job);
}

void AttemptLauncher::EnforceStartTimeout(JobEntry& job, int64_t now_ms) {
  const std::string& name = job.record.name;
  v1::JobStatus& st = job.record.status;
  if (now_ms < StartDeadlineMs(st, options_.start_timeout)) return;
  // The nodes at fault, in placement order: while ports are awaited no plan has gone out, so
  // only the nodes that did not answer are; after that, those with ranks that never reported.
  // The attempt failed for the infrastructure, not the job, when no node at fault is known to
  // have had its plan: the ranks never had a chance (issue 19, defect 4).
  std::string silent;
  std::vector<std::string> at_fault;  // whose Pending workers the failure names (failure rules)
  bool infrastructure = true;
  if (port_waits_.Request(name, st.attempt()) != nullptr) {
    for (const std::string& node : port_waits_.Unanswered(name, st.attempt())) {
      at_fault.push_back(node);
      // An agent that reports its attempts answers every ask it gets: the ask was lost. Of one
      // that does not, nothing is known (as before the report existed).
      const NodeEntry* e = registry_->Find(node);
      if (e != nullptr && e->state != NodeState::kLost && !e->reports_attempts) {
        infrastructure = false;
      }
      silent += (silent.empty() ? "" : ", ") + node + " (its ports never arrived)";
    }
  } else {
    for (const std::string& node : st.placement()) {
      const bool pending = std::any_of(st.ranks().begin(), st.ranks().end(), [&](const auto& r) {
        return r.node() == node && r.rank_state() == v1::RANK_STATE_PENDING;
      });
      if (!pending) continue;
      at_fault.push_back(node);
      const bool reached = delivery_.Reached(st, node, *registry_);
      infrastructure = infrastructure && !reached;
      silent += (silent.empty() ? "" : ", ") + node +
                (reached ? " (no rank reported started)" : " (its plan never reached it)");
    }
  }
  const auto never_started = [&](const v1::RankStatus& r) {
    return r.rank_state() == v1::RANK_STATE_PENDING &&
           std::find(at_fault.begin(), at_fault.end(), r.node()) != at_fault.end();
  };
  owner_->FailAttempt(job,
                      FailureOfRanks(st, never_started,
                                     "StartTimeout: ranks not started " +
                                         std::to_string(options_.start_timeout.count()) +
                                         " ms after the attempt was placed, on " + silent),
                      now_ms, infrastructure ? FailureKind::kInfrastructure : FailureKind::kJob);
  // Ranks that never reported are given up, like a lost node's, so the restart does not wait
  // for events that may never come; the StopWorkers FailAttempt sent ends any that do exist.
  for (auto& r : *st.mutable_ranks()) {
    if (r.rank_state() != v1::RANK_STATE_PENDING) continue;
    TRAINLET_CHECK(ApplyRankTrigger(r, RankTrigger::kNodeLost).ok());
    r.set_message("never reported started within the start timeout");
  }
  owner_->MarkDirty(job);
}

}  // namespace trainlet::coordinator
