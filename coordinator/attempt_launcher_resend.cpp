// AttemptLauncher's resend of lost plans (issue 19, defect 4): a plan that never reached its node
// is sent again as it was, or, by a coordinator that restarted since it was sent, rendered again
// from the stored attempt. And what a restarted coordinator makes again the same way: the
// workers its predecessor held for their dependencies (RebuildHeld, issue 18). Split from
// attempt_launcher.cpp by responsibility; same class, same loop.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "coordinator/attempt_launcher.h"
#include "coordinator/attempt_steps.h"
#include "coordinator/lifecycle_rules.h"
#include "coordinator/rank_state_machine.h"

namespace trainlet::coordinator {

void AttemptLauncher::ResendLostPlans(JobEntry& job, int64_t now_ms) {
  const std::string& name = job.record.name;
  const v1::JobStatus& st = job.record.status;
  if (job.plugin == nullptr) return;
  // While ports are awaited no plan went out. The asks are repeated at registration
  // (ResendPortAsks), and to a node that stays connected but never got one.
  if (port_waits_.Request(name, st.attempt()) != nullptr) {
    for (const std::string& node : port_waits_.Unanswered(name, st.attempt())) {
      if (!delivery_.AskLost(st, node, *registry_, now_ms)) continue;
      spdlog::warn("trainjob/{}: node {} never got the ReservePorts of attempt {}: asking again",
                   name, node, st.attempt());
      port_waits_.Resend(node);
      delivery_.Tried(name, st.attempt(), node, now_ms);
    }
    return;
  }
  const std::vector<std::string> lost = delivery_.Missing(st, *registry_, now_ms);
  if (lost.empty()) return;
  std::vector<std::string> unsent;
  for (const std::string& node : lost) {
    const v1::LaunchPlan* plan = delivery_.Plan(name, st.attempt(), node);
    if (plan == nullptr) {
      unsent.push_back(node);
      continue;
    }
    spdlog::warn("trainjob/{}: node {} does not hold the plan of attempt {}: sending it again",
                 name, node, st.attempt());
    SendPlan(node, *plan, now_ms);
  }
  if (!unsent.empty()) Replan(job, unsent, now_ms);
}

void AttemptLauncher::Replan(JobEntry& job, const std::vector<std::string>& lost, int64_t now_ms) {
  const std::string& name = job.record.name;
  const v1::JobStatus& st = job.record.status;
  std::optional<PlanRequest> req = StoredRequest(job);
  if (!req) return;  // a node is not back yet: try again later
  auto layout = LayoutAttempt(*job.plugin, *req);
  if (!layout.ok()) {
    owner_->FailAttempt(job, "its lost plans could not be made again: " + layout.status().message(),
                        now_ms, FailureKind::kInfrastructure);
    return;
  }
  // The launcher's key pair is new only when the launcher's own plan is lost and its secret with
  // it: a launcher that runs keeps its key.
  const auto launcher_lost = [&](size_t node) {
    return std::find(lost.begin(), lost.end(), st.placement(static_cast<int>(node))) != lost.end();
  };
  std::optional<LauncherSecret> secret =
      SecretToRenderAgain(job, *req, *layout, launcher_lost, now_ms);
  if (!secret) return;
  for (const std::string& node : lost) delivery_.Tried(name, st.attempt(), node, now_ms);
  spdlog::warn(
      "trainjob/{}: {} node(s) do not hold the plan of attempt {}, which this "
      "coordinator did not send: making it again",
      name, lost.size(), st.attempt());
  // A runtime with ports asks every node again: an agent answers with the ports it holds for
  // the attempt (the ranks that run have them), and the plans go to the lost nodes only.
  // No checkpoint to compare: this attempt's work dirs were compared when it was placed.
  if (port_waits_.Begin(name, *req, *layout, /*checkpoint=*/"", st.uid())) {
    for (const std::string& node : port_waits_.Unanswered(name, st.attempt())) {
      delivery_.Tried(name, st.attempt(), node, now_ms);
    }
    resend_to_[name] = lost;
    return;
  }
  auto plans = RenderAgain(job, *req, *layout, *secret, "its lost plans", now_ms);
  if (!plans) return;
  HoldAgain(name, st.attempt(), {st.placement().begin(), st.placement().end()}, *plans);
  for (size_t i = 0; i < plans->size(); ++i) {
    const std::string& node = st.placement(static_cast<int>(i));
    if (std::find(lost.begin(), lost.end(), node) == lost.end()) continue;
    SendPlan(node, std::move((*plans)[i]), now_ms);
  }
}

std::optional<PlanRequest> AttemptLauncher::StoredRequest(const JobEntry& job) const {
  const v1::JobStatus& st = job.record.status;
  PlanRequest req = job.plan_template;
  req.attempt = st.attempt();
  // The restart env from the attempts before this one, and the preemption flag as it was when
  // this one was placed (cleared then).
  v1::JobStatus before = st;
  if (before.attempts_size() > 0) before.mutable_attempts()->RemoveLast();
  before.set_preempted(st.attempt_follows_preemption());
  for (auto& kv : RestartEnv(before)) req.env.push_back(std::move(kv));
  for (const std::string& n : st.placement()) {
    const NodeEntry* e = registry_->Find(n);
    if (e == nullptr) return std::nullopt;
    PlacedNode& placed = req.nodes.emplace_back();
    placed.name = n;
    placed.address = e->info.address();
    placed.hostname = e->info.hostname();
    placed.topology = e->info.topology();
  }
  return req;
}

std::optional<LauncherSecret> AttemptLauncher::SecretToRenderAgain(
    JobEntry& job, PlanRequest& req, const AttemptLayout& layout,
    const std::function<bool(size_t node)>& launcher_goes, int64_t now_ms) {
  const std::string& name = job.record.name;
  v1::JobStatus& st = job.record.status;
  LauncherSecret secret = exec_->SecretOf(name);
  if (!layout.exec_launcher_rank) return secret;
  // The exec fields of the request.
  auto issued = exec_->IssueLauncherKeys(req);
  if (!issued.ok()) {
    owner_->FailAttempt(job, issued.status().message(), now_ms, FailureKind::kInfrastructure);
    return std::nullopt;
  }
  size_t launcher_node = 0;
  for (size_t i = 0; i < layout.nodes.size(); ++i) {
    for (const auto& r : layout.nodes[i].ranks) {
      if (r.rank == *layout.exec_launcher_rank) launcher_node = i;
    }
  }
  if (secret.z85.empty() && launcher_goes(launcher_node)) {
    secret = std::move(*issued);
    st.set_launcher_key(req.launcher_public_key);
    exec_->SetLauncherSecret(name, secret.z85);
    owner_->MarkDirty(job);
  } else {
    req.launcher_public_key = st.launcher_key();
    // Rendered for the launcher's plan only, which is not sent when it does not go.
    if (secret.z85.empty()) secret = std::move(*issued);
  }
  return secret;
}

std::optional<std::vector<v1::LaunchPlan>> AttemptLauncher::RenderAgain(
    JobEntry& job, const PlanRequest& req, const AttemptLayout& layout,
    const LauncherSecret& secret, const std::string& what, int64_t now_ms) {
  auto plans = RenderAttempt(*job.plugin, req, layout, secret);
  // The runtime's other replicated jobs, as Place added them (attempt_steps.h).
  auto steps = StepsOf(job.spec, job.runtime);
  if (plans.ok() && !steps.ok()) plans = steps.status();
  if (!plans.ok()) {
    owner_->FailAttempt(job, what + " could not be made again: " + plans.status().message(), now_ms,
                        FailureKind::kInfrastructure);
    return std::nullopt;
  }
  AddStepsToPlans(*steps, layout, *plans);
  for (auto& plan : *plans) plan.set_job_uid(job.record.status.uid());
  return std::move(plans).value();
}

void AttemptLauncher::HoldAgain(const std::string& job, uint32_t attempt,
                                const std::vector<std::string>& nodes,
                                std::vector<v1::LaunchPlan>& plans) {
  if (releases_.Knows(job, attempt)) {
    releases_.Hold(job, attempt, nodes, plans);
  } else {
    StepRelease::Strip(nodes, plans);  // RebuildHeld holds them
  }
}

namespace {

// Every node of `status`'s placement registered with this coordinator and beat
// PlanDelivery::kAckWaitMs after: the worker events it had not had acknowledged, which an agent
// sends again as soon as its registration is accepted and before its next beats, are applied.
// Before that, a worker that ran and ended while the coordinator was down still looks Pending.
bool NodesSettled(const v1::JobStatus& status, const NodeRegistry& registry) {
  return std::all_of(status.placement().begin(), status.placement().end(), [&](const auto& n) {
    const NodeEntry* e = registry.Find(n);
    return e != nullptr && e->state != NodeState::kLost &&
           e->last_beat_unix_ms >= e->registered_unix_ms + PlanDelivery::kAckWaitMs;
  });
}

}  // namespace

void AttemptLauncher::RebuildHeld(JobEntry& job, int64_t now_ms) {
  const std::string& name = job.record.name;
  const v1::JobStatus& st = job.record.status;
  if (job.plugin == nullptr || st.deleting() || st.placement_size() < 2 ||
      PhaseOf(st) != JobPhase::kStarting || releases_.Knows(name, st.attempt()) ||
      port_waits_.Request(name, st.attempt()) != nullptr) {
    return;
  }
  // Only a replicated job other than the main one can make a worker wait, and only a Pending
  // worker can be held.
  const auto& ranks = st.ranks();
  if (std::none_of(ranks.begin(), ranks.end(), [](const auto& r) { return !r.step().empty(); }) ||
      std::none_of(ranks.begin(), ranks.end(),
                   [](const auto& r) { return r.rank_state() == v1::RANK_STATE_PENDING; })) {
    return;
  }
  if (!NodesSettled(st, *registry_)) return;
  std::optional<PlanRequest> req = StoredRequest(job);
  if (!req) return;
  auto layout = LayoutAttempt(*job.plugin, *req);
  auto steps = StepsOf(job.spec, job.runtime);
  if (!layout.ok() || !steps.ok()) {
    owner_->FailAttempt(job,
                        "its held workers could not be made again: " +
                            (layout.ok() ? steps.status() : layout.status()).message(),
                        now_ms, FailureKind::kInfrastructure);
    return;
  }
  // A launcher held for `node`'s dependencies goes out only from here (the main step waits).
  const auto launcher_held = [&](size_t) {
    if (steps->main_depends_on.empty()) return false;
    return std::any_of(ranks.begin(), ranks.end(), [&](const v1::RankStatus& r) {
      return r.rank() == *layout->exec_launcher_rank && r.rank_state() == v1::RANK_STATE_PENDING;
    });
  };
  std::optional<LauncherSecret> secret =
      SecretToRenderAgain(job, *req, *layout, launcher_held, now_ms);
  if (!secret) return;
  spdlog::warn(
      "trainjob/{}: this coordinator holds none of the workers of attempt {} that wait for "
      "their dependencies: making them again",
      name, st.attempt());
  // With ports, every node is asked for those it holds for the attempt; no plan is sent after.
  if (port_waits_.Begin(name, *req, *layout, /*checkpoint=*/"", st.uid())) {
    for (const std::string& node : port_waits_.Unanswered(name, st.attempt())) {
      delivery_.Tried(name, st.attempt(), node, now_ms);
    }
    rebuilding_.insert(name);
    return;
  }
  auto plans = RenderAgain(job, *req, *layout, *secret, "its held workers", now_ms);
  if (plans) HoldRebuilt(job, std::move(*plans));
}

void AttemptLauncher::HoldRebuilt(JobEntry& job, std::vector<v1::LaunchPlan> plans) {
  const v1::JobStatus& st = job.record.status;
  releases_.Rebuild(st, {st.placement().begin(), st.placement().end()}, std::move(plans));
  if (releases_.Holding(job.record.name, st.attempt())) {
    spdlog::info(
        "trainjob/{}: attempt {}'s workers that wait for their dependencies are held again",
        job.record.name, st.attempt());
  }
  ReleaseSteps(job);  // their dependencies may have been met while no coordinator ran
}

}  // namespace trainlet::coordinator
