#include "coordinator/step_release.h"

#include <algorithm>
#include <set>

#include "coordinator/rank_state_machine.h"

namespace trainlet::coordinator {

bool DependencyMetEverywhere(const v1::JobStatus& status, const v1::StepDependency& need) {
  const bool complete = need.status() == "Complete";
  return std::all_of(status.ranks().begin(), status.ranks().end(), [&](const v1::RankStatus& r) {
    if (r.step() != need.step()) return true;
    if (r.rank_state() == v1::RANK_STATE_SUCCEEDED) return true;
    return !complete && r.rank_state() == v1::RANK_STATE_RUNNING;
  });
}

void StepRelease::Hold(const std::string& job, uint32_t attempt,
                       const std::vector<std::string>& nodes, std::vector<v1::LaunchPlan>& plans) {
  if (nodes.size() < 2 || plans.size() != nodes.size()) return;
  Job& held = jobs_[job];
  const bool fresh = held.attempt != attempt;
  if (fresh) held = Job{attempt, {}};
  for (size_t n = 0; n < plans.size(); ++n) {
    v1::LaunchPlan& plan = plans[n];
    for (const v1::PlanStep& waits : plan.steps()) {
      if (waits.depends_on().empty()) continue;
      auto [it, added] = held.steps.try_emplace(waits.name());
      Waiting& w = it->second;
      if (added) w.needs.assign(waits.depends_on().begin(), waits.depends_on().end());
      const bool keep = fresh || !w.plans.contains(nodes[n]);
      v1::LaunchPlan own;
      if (keep) {
        own = plan;
        own.clear_workers();
      }
      auto* workers = plan.mutable_workers();
      for (int i = 0; i < workers->size();) {
        if (workers->Get(i).step() != waits.name()) {
          ++i;
          continue;
        }
        if (keep) *own.add_workers() = workers->Get(i);
        workers->DeleteSubrange(i, 1);
      }
      if (keep && own.workers_size() > 0) w.plans[nodes[n]] = std::move(own);
    }
  }
}

std::vector<std::pair<std::string, v1::LaunchPlan>> StepRelease::Release(
    const v1::JobStatus& status) {
  std::vector<std::pair<std::string, v1::LaunchPlan>> out;
  auto it = jobs_.find(status.name());
  if (it == jobs_.end() || it->second.attempt != status.attempt()) return out;
  for (auto& [name, w] : it->second.steps) {
    if (w.released) continue;
    if (!std::all_of(w.needs.begin(), w.needs.end(), [&](const v1::StepDependency& d) {
          return DependencyMetEverywhere(status, d);
        })) {
      continue;
    }
    w.released = true;
    for (const auto& [node, plan] : w.plans) out.emplace_back(node, plan);
  }
  return out;
}

std::vector<v1::LaunchPlan> StepRelease::Unstarted(const v1::JobStatus& status,
                                                   const std::string& node) const {
  std::vector<v1::LaunchPlan> out;
  auto it = jobs_.find(status.name());
  if (it == jobs_.end() || it->second.attempt != status.attempt()) return out;
  for (const auto& [name, w] : it->second.steps) {
    if (!w.released) continue;
    auto plan = w.plans.find(node);
    if (plan == w.plans.end()) continue;
    const bool pending = std::any_of(
        plan->second.workers().begin(), plan->second.workers().end(),
        [&](const v1::WorkerSpec& spec) {
          return std::any_of(
              status.ranks().begin(), status.ranks().end(), [&](const v1::RankStatus& r) {
                return r.rank() == spec.rank() && r.rank_state() == v1::RANK_STATE_PENDING;
              });
        });
    if (pending) out.push_back(plan->second);
  }
  return out;
}

bool StepRelease::EndHeld(v1::JobStatus& status) {
  auto it = jobs_.find(status.name());
  if (it == jobs_.end() || it->second.attempt != status.attempt()) return false;
  std::set<uint32_t> held;
  for (const auto& [name, w] : it->second.steps) {
    if (w.released) continue;
    for (const auto& [node, plan] : w.plans) {
      for (const auto& spec : plan.workers()) held.insert(spec.rank());
    }
  }
  jobs_.erase(it);
  bool changed = false;
  for (auto& r : *status.mutable_ranks()) {
    if (r.rank_state() != v1::RANK_STATE_PENDING || !held.contains(r.rank())) continue;
    TRAINLET_CHECK(ApplyRankTrigger(r, RankTrigger::kAttemptStopped).ok());
    r.set_message(
        "never started: the attempt ended before its dependencies were met on every node");
    changed = true;
  }
  return changed;
}

bool StepRelease::Knows(const std::string& job, uint32_t attempt) const {
  auto it = jobs_.find(job);
  return it != jobs_.end() && it->second.attempt == attempt;
}

void StepRelease::Rebuild(const v1::JobStatus& status, const std::vector<std::string>& nodes,
                          std::vector<v1::LaunchPlan> plans) {
  if (nodes.size() < 2 || Knows(status.name(), status.attempt())) return;
  Hold(status.name(), status.attempt(), nodes, plans);
  Job& held = jobs_[status.name()];
  if (held.attempt != status.attempt()) held = Job{status.attempt(), {}};  // plans did not match
  std::set<uint32_t> pending;
  for (const auto& r : status.ranks()) {
    if (r.rank_state() == v1::RANK_STATE_PENDING) pending.insert(r.rank());
  }
  for (auto& [name, w] : held.steps) {
    for (auto plan = w.plans.begin(); plan != w.plans.end();) {
      auto* workers = plan->second.mutable_workers();
      workers->erase(std::remove_if(workers->begin(), workers->end(),
                                    [&](const v1::WorkerSpec& spec) {
                                      return !pending.contains(spec.rank());
                                    }),
                     workers->end());
      plan = workers->empty() ? w.plans.erase(plan) : std::next(plan);
    }
    w.released = w.plans.empty();  // every worker of it started before the restart
  }
}

void StepRelease::Strip(const std::vector<std::string>& nodes, std::vector<v1::LaunchPlan>& plans) {
  StepRelease scratch;  // holds them, and is dropped with them
  scratch.Hold("", 1, nodes, plans);
}

bool StepRelease::Holding(const std::string& job, uint32_t attempt) const {
  auto it = jobs_.find(job);
  if (it == jobs_.end() || it->second.attempt != attempt) return false;
  return std::any_of(it->second.steps.begin(), it->second.steps.end(),
                     [](const auto& s) { return !s.second.released; });
}

}  // namespace trainlet::coordinator
