// Where a job's ranks run: the container's workingDir, and the cluster's shared directory.
//
// Every runtime plugin's plans pass through SetWorkerCwds (called by RenderAttempt), so the rule
// is kept in this one place rather than in each plugin. It writes WorkerSpec.cwd as the agents
// read it (launch.proto):
//   - each worker whose container sets workingDir gets it, as written: relative to the job's
//     work dir on the node, or absolute; the main workers (WorkerSpec.step "") the runtime
//     container's, a step's worker its own replicated job's container's (attempt_steps.h);
//   - a job annotated trainlet.io/working-dir: shared runs every worker in the job's directory
//     under its agent's shared_dir, "$(TRAINLET_SHARED_WORK_DIR)", the same path on every node
//     (a relative workingDir goes under it; an absolute one stays as it is);
//   - a cwd a plugin set itself is kept.
// A shared job is only placed on nodes whose agent has a shared_dir: BuildJobEntry adds the label
// agents set then (kSharedDirLabel) to the job's node selector (SharedDirSelector).
//
// Pure functions; any thread.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "trainlet/runtime_plugin.h"
#include "trainlet/v1/launch.pb.h"

namespace trainlet::coordinator {

// The job annotation choosing where ranks run: "node" (the default: the job's own work dir on
// each node) or "shared" (the agents' shared_dir).
inline constexpr std::string_view kWorkingDirAnnotation = "trainlet.io/working-dir";
// The node label an agent with a shared_dir sets ("true"); shared jobs select it.
inline constexpr std::string_view kSharedDirLabel = "trainlet.io/shared-dir";
// The WorkerSpec.cwd variable the agent expands to <shared_dir>/<job>.
inline constexpr std::string_view kSharedWorkDirVar = "$(TRAINLET_SHARED_WORK_DIR)";

enum class WorkDirPlace { kNode, kShared };

// The place `annotations` ask for. Invalid for a value other than "node", "shared" or "":
//   "metadata.annotations[trainlet.io/working-dir]: must be node or shared, got \"nfs\""
Result<WorkDirPlace> WorkDirPlaceOf(const std::map<std::string, std::string>& annotations);

// The node selector entries a job needs for its place: {kSharedDirLabel: "true"} for kShared.
std::map<std::string, std::string> SharedDirSelector(WorkDirPlace place);

// The WorkerSpec.cwd of a worker whose container's workingDir is `working_dir` ("" when unset),
// for a job at `place`, by the rules at the top of this file. Steps (attempt_steps.h) get their own
// container's this way; the main workers get it through SetWorkerCwds.
std::string WorkerCwdFor(WorkDirPlace place, const std::string& working_dir);

// Sets the cwd of `plans`' workers for `request` (its working_dir and annotations), by the rules
// at the top of this file. Invalid when the annotation is (WorkDirPlaceOf).
Status SetWorkerCwds(const PlanRequest& request, std::vector<v1::LaunchPlan>& plans);

}  // namespace trainlet::coordinator
