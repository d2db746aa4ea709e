#include "coordinator/attempt_plan.h"

#include <algorithm>

#include "coordinator/working_dir.h"
#include "plugins/plugin_status.h"

namespace trainlet::coordinator {
namespace {

// The annotation that tells the agents how to bind ranks ("none": bind nothing).
constexpr const char* kBindingAnnotation = "trainlet.io/binding";

Status PluginBroke(const RuntimePlugin& plugin, const std::string& what) {
  return InternalError("the " + std::string(plugin.name()) + " runtime plugin " + what);
}

Status CheckLayout(const RuntimePlugin& plugin, const PlanRequest& request,
                   const AttemptLayout& layout) {
  if (layout.nodes.size() != request.nodes.size()) {
    return PluginBroke(plugin, "laid out " + std::to_string(layout.nodes.size()) +
                                   " nodes for a placement of " +
                                   std::to_string(request.nodes.size()));
  }
  size_t world = 0;
  for (const NodeLayout& node : layout.nodes) world += node.ranks.size();
  std::vector<bool> seen(world, false);
  for (const NodeLayout& node : layout.nodes) {
    for (const LaidOutRank& r : node.ranks) {
      if (r.rank >= world || seen[r.rank]) {
        return PluginBroke(plugin, "laid out rank " + std::to_string(r.rank) + " twice or out of " +
                                       "range (world size " + std::to_string(world) + ")");
      }
      seen[r.rank] = true;
    }
  }
  if (layout.exec_launcher_rank && *layout.exec_launcher_rank >= world) {
    return PluginBroke(plugin, "named rank " + std::to_string(*layout.exec_launcher_rank) +
                                   " its exec launcher, which it did not lay out");
  }
  return Status::Ok();
}

// The plans must carry exactly the ranks that were stored from the layout.
Status CheckPlans(const RuntimePlugin& plugin, const PlanRequest& request,
                  const AttemptLayout& layout, const std::vector<v1::LaunchPlan>& plans) {
  if (plans.size() != request.nodes.size()) {
    return PluginBroke(plugin, "made " + std::to_string(plans.size()) + " plans for " +
                                   std::to_string(request.nodes.size()) + " nodes");
  }
  for (size_t n = 0; n < plans.size(); ++n) {
    const auto& ranks = layout.nodes[n].ranks;
    const auto& workers = plans[n].workers();
    bool same = static_cast<size_t>(workers.size()) == ranks.size();
    for (size_t i = 0; same && i < ranks.size(); ++i) {
      const auto& w = workers[static_cast<int>(i)];
      same = w.rank() == ranks[i].rank && w.local_rank() == ranks[i].local_rank;
    }
    if (!same) {
      return PluginBroke(plugin, "rendered node rank " + std::to_string(n) + " (" +
                                     request.nodes[n].name + ") with other ranks than it laid out");
    }
  }
  return Status::Ok();
}

// The launcher's credentials, as trainlet-exec reads them (cli/trainlet-exec/main.cpp).
Status AddExecCredentials(const PlanRequest& request, uint32_t launcher_rank,
                          const LauncherSecret& secret, std::vector<v1::LaunchPlan>& plans) {
  if (request.exec_endpoint.empty() || request.launcher_public_key.empty() || secret.z85.empty()) {
    return InternalError("an exec launcher without its credentials (endpoint or keys missing)");
  }
  for (auto& plan : plans) {
    for (auto& w : *plan.mutable_workers()) {
      if (w.rank() != launcher_rank) continue;
      auto& env = *w.mutable_env();
      env["TRAINLET_EXEC_ENDPOINT"] = request.exec_endpoint;
      env["TRAINLET_EXEC_SERVER_KEY"] = request.exec_server_key;
      env["TRAINLET_EXEC_PUBLIC_KEY"] = request.launcher_public_key;
      env["TRAINLET_EXEC_KEY"] = secret.z85;
      return Status::Ok();
    }
  }
  return InternalError("no plan holds the exec launcher, rank " + std::to_string(launcher_rank));
}

// The runtime container's securityContext user and group, on the workers of the main replicated
// job (the other steps carry their own container's, attempt_steps.h).
void SetRunAs(const PlanRequest& request, std::vector<v1::LaunchPlan>& plans) {
  for (auto& plan : plans) {
    for (auto& w : *plan.mutable_workers()) {
      if (!w.step().empty()) continue;
      if (request.run_as_user && !w.has_run_as_user()) w.set_run_as_user(*request.run_as_user);
      if (request.run_as_group && !w.has_run_as_group()) w.set_run_as_group(*request.run_as_group);
      if (request.allow_privilege_escalation && !w.has_allow_privilege_escalation())
        w.set_allow_privilege_escalation(*request.allow_privilege_escalation);
      if (request.fs_group && !w.has_fs_group()) w.set_fs_group(*request.fs_group);
    }
  }
}

}  // namespace

Result<AttemptLayout> LayoutAttempt(const RuntimePlugin& plugin, const PlanRequest& request) {
  TRAINLET_ASSIGN_OR_RETURN(AttemptLayout layout, ToResult(plugin.Layout(request)));
  TRAINLET_RETURN_IF_ERROR(CheckLayout(plugin, request, layout));
  return layout;
}

bool WantsPorts(const AttemptLayout& layout) {
  return std::any_of(layout.nodes.begin(), layout.nodes.end(),
                     [](const NodeLayout& n) { return n.ports > 0; });
}

Result<std::vector<v1::LaunchPlan>> RenderAttempt(const RuntimePlugin& plugin,
                                                  const PlanRequest& request,
                                                  const AttemptLayout& layout,
                                                  const LauncherSecret& secret) {
  TRAINLET_RETURN_IF_ERROR(CheckLayout(plugin, request, layout));
  for (size_t n = 0; n < request.nodes.size(); ++n) {
    if (request.nodes[n].ports.size() != layout.nodes[n].ports) {
      return InternalError("node rank " + std::to_string(n) + " (" + request.nodes[n].name +
                           ") holds " + std::to_string(request.nodes[n].ports.size()) +
                           " ports, its layout wants " + std::to_string(layout.nodes[n].ports));
    }
  }
  TRAINLET_ASSIGN_OR_RETURN(std::vector<v1::LaunchPlan> plans,
                            ToResult(plugin.Render(request, layout)));
  TRAINLET_RETURN_IF_ERROR(CheckPlans(plugin, request, layout, plans));
  TRAINLET_RETURN_IF_ERROR(SetWorkerCwds(request, plans));  // workingDir, shared dir
  // The slots each node holds for the job, as the planner charged them: the agent sizes the
  // job's CPU share from them (agent/cpu_allotment.h).
  if (auto procs = plugin.ProcsPerNode(request.num_proc_per_node, nullptr); procs.ok()) {
    for (auto& plan : plans) plan.set_slots(*procs);
  }
  SetRunAs(request, plans);
  if (auto b = request.annotations.find(kBindingAnnotation); b != request.annotations.end()) {
    for (auto& plan : plans) plan.set_binding(b->second);
  }
  if (layout.exec_launcher_rank) {
    TRAINLET_RETURN_IF_ERROR(
        AddExecCredentials(request, *layout.exec_launcher_rank, secret, plans));
  }
  return plans;
}

}  // namespace trainlet::coordinator
