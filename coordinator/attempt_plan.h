// Planning one attempt with its runtime plugin (include/trainlet/runtime_plugin.h): the layout,
// before any port is reserved, and the launch plans, once the ports are held.
//
// These functions stand between the coordinator and a plugin. They check what the plugin answers,
// so a broken plugin fails an attempt rather than the coordinator, and they add what never passes
// through a plugin: the exec launcher's secret key, and the agents' binding switch. Pure
// functions of their arguments; called from the coordinator's loop.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "trainlet/runtime_plugin.h"
#include "trainlet/v1/launch.pb.h"

namespace trainlet::coordinator {

// An attempt's launcher secret key (Z85), made by the coordinator with the launcher's public key
// for a plugin whose layout names an exec launcher. Held in memory only; never stored, never in a
// PlanRequest. Empty when the attempt has no exec launcher.
struct LauncherSecret {
  std::string z85;
};

// plugin.Layout(request) for `request` as placed, without ports (PlacedNode::ports empty), and
// checked: one NodeLayout per placed node; every rank from 0 to the world size - 1 laid out once;
// the exec launcher, if named, one of them. Errors: the plugin's refusal, with its code and
// message (the request cannot run on this runtime); Internal for a layout that breaks the rules.
Result<AttemptLayout> LayoutAttempt(const RuntimePlugin& plugin, const PlanRequest& request);

// True when some node of `layout` must reserve ports before the attempt is rendered.
bool WantsPorts(const AttemptLayout& layout);

// plugin.Render(request, layout), where `layout` came from LayoutAttempt and `request` is the one
// it was given plus, on each node, the layout.nodes[i].ports ports its agent reserved (and, for an
// exec launcher, the exec_* fields). Checked: one plan per node, in node-rank order, whose workers
// are that node's laid-out ranks in order. Then the workers get their cwd (working_dir.h), each
// plan gets the trainlet.io/binding annotation when the request has one, and the exec launcher's
// worker its TRAINLET_EXEC_* env, which trainlet-exec reads: the request's endpoint and keys, and
// `secret`. Errors: the plugin's (a port missing), Invalid for a bad trainlet.io/working-dir, or
// Internal for plans that break the layout or a launcher without its keys.
Result<std::vector<v1::LaunchPlan>> RenderAttempt(const RuntimePlugin& plugin,
                                                  const PlanRequest& request,
                                                  const AttemptLayout& layout,
                                                  const LauncherSecret& secret);

}  // namespace trainlet::coordinator
