// AttemptLauncher's resend of lost plans (issue 19, defect 4): a plan that never reached its node
// is sent again as it was, or, by a coordinator that restarted since it was sent, rendered again
// from the stored attempt. Split from attempt_launcher.cpp by responsibility; same class, same
// loop.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "coordinator/attempt_launcher.h"
#include "coordinator/attempt_steps.h"
#include "coordinator/lifecycle_rules.h"

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
  v1::JobStatus& st = job.record.status;
  // The request as Place made it: the same nodes in the same order, the same restart env (from
  // the attempts before this one).
  PlanRequest req = job.plan_template;
  req.attempt = st.attempt();
  v1::JobStatus before = st;
  if (before.attempts_size() > 0) before.mutable_attempts()->RemoveLast();
  before.set_preempted(st.attempt_follows_preemption());  // cleared when the attempt was placed
  for (auto& kv : RestartEnv(before)) req.env.push_back(std::move(kv));
  for (const std::string& n : st.placement()) {
    const NodeEntry* e = registry_->Find(n);
    if (e == nullptr) return;  // not back yet: its address is in every plan; try again later
    PlacedNode& placed = req.nodes.emplace_back();
    placed.name = n;
    placed.address = e->info.address();
    placed.hostname = e->info.hostname();
    placed.topology = e->info.topology();
  }
  auto layout = LayoutAttempt(*job.plugin, req);
  if (!layout.ok()) {
    owner_->FailAttempt(job, "its lost plans could not be made again: " + layout.status().message(),
                        now_ms, FailureKind::kInfrastructure);
    return;
  }
  LauncherSecret secret = exec_->SecretOf(name);
  if (layout->exec_launcher_rank) {
    // The exec fields of the request; the key pair is new only when the launcher's own plan is
    // lost and its secret with it (never stored): a launcher that runs keeps its key.
    auto issued = exec_->IssueLauncherKeys(req);
    if (!issued.ok()) {
      owner_->FailAttempt(job, issued.status().message(), now_ms, FailureKind::kInfrastructure);
      return;
    }
    size_t launcher_node = 0;
    for (size_t i = 0; i < layout->nodes.size(); ++i) {
      for (const auto& r : layout->nodes[i].ranks) {
        if (r.rank == *layout->exec_launcher_rank) launcher_node = i;
      }
    }
    const bool launcher_lost =
        std::find(lost.begin(), lost.end(), st.placement(static_cast<int>(launcher_node))) !=
        lost.end();
    if (secret.z85.empty() && launcher_lost) {
      secret = std::move(*issued);
      st.set_launcher_key(req.launcher_public_key);
      exec_->SetLauncherSecret(name, secret.z85);
      owner_->MarkDirty(job);
    } else {
      req.launcher_public_key = st.launcher_key();
      // Rendered for the launcher's plan only, which is not sent when it is not lost.
      if (secret.z85.empty()) secret = std::move(*issued);
    }
  }
  for (const std::string& node : lost) delivery_.Tried(name, st.attempt(), node, now_ms);
  spdlog::warn(
      "trainjob/{}: {} node(s) do not hold the plan of attempt {}, which this "
      "coordinator did not send: making it again",
      name, lost.size(), st.attempt());
  // A runtime with ports asks every node again: an agent answers with the ports it holds for
  // the attempt (the ranks that run have them), and the plans go to the lost nodes only.
  // No checkpoint to compare: this attempt's work dirs were compared when it was placed.
  if (port_waits_.Begin(name, req, *layout, /*checkpoint=*/"")) {
    for (const std::string& node : port_waits_.Unanswered(name, st.attempt())) {
      delivery_.Tried(name, st.attempt(), node, now_ms);
    }
    resend_to_[name] = lost;
    return;
  }
  auto plans = RenderAttempt(*job.plugin, req, *layout, secret);
  // The runtime's other replicated jobs, as Place added them (attempt_steps.h).
  auto steps = StepsOf(job.spec, job.runtime);
  if (plans.ok() && !steps.ok()) plans = steps.status();
  if (!plans.ok()) {
    owner_->FailAttempt(job, "its lost plans could not be made again: " + plans.status().message(),
                        now_ms, FailureKind::kInfrastructure);
    return;
  }
  AddStepsToPlans(*steps, *layout, *plans);
  for (auto& plan : *plans) plan.set_job_uid(st.uid());
  releases_.Hold(name, st.attempt(), {st.placement().begin(), st.placement().end()}, *plans);
  for (size_t i = 0; i < plans->size(); ++i) {
    const std::string& node = st.placement(static_cast<int>(i));
    if (std::find(lost.begin(), lost.end(), node) == lost.end()) continue;
    SendPlan(node, std::move((*plans)[i]), now_ms);
  }
}

}  // namespace trainlet::coordinator
