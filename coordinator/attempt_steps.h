// AttemptSteps: the replicated jobs of a runtime other than the main one ("steps", e.g.
// dataset-initializer), and how they join an attempt next to what the runtime plugin rendered.
//
// The rules (docs/runtimes.md, "Replicated jobs"):
//  - Every replicatedJob other than `node` and `launcher` (which runtime plugins run) is a step.
//    A step runs `replicas` workers on EVERY placed node of the gang, with its own container's
//    command, args and env, never the trainer's env and no RANK/WORLD_SIZE of the training;
//    trainlet adds TRAINLET_JOB, TRAINLET_ATTEMPT, TRAINLET_STEP, TRAINLET_STEP_REPLICA,
//    TRAINLET_NODE_RANK and TRAINLET_NUM_NODES (the agent adds its node's TRAINLET_* on top).
//  - Its workers get global rank numbers after the main world W: step by step in the runtime's
//    order, then node by node in placement order, then replica by replica. Their local rank is the
//    replica's index on the node.
//  - A step runs in its own container's workingDir (relative to the job's work dir, or absolute;
//    under the shared directory for a shared job), as the main workers run in theirs.
//  - A `dataset-initializer` or `model-initializer` step whose container sets no command runs the
//    built-in initializer, argv ["trainlet-initializer", "dataset"|"model"]. A step named so gets
//    STORAGE_URI from the TrainJob's spec.initializer.dataset/.model and that initializer's env on
//    top of its container's (the TrainJob's value wins a shared key, as Kubeflow's does).
//  - dependsOn becomes LaunchPlan.steps; the agent's trainlet-step holds a worker until its
//    step's dependencies are met on its node, and on more than one node the coordinator holds it
//    until they are met on every node (step_release.h). `node`'s dependsOn is the main step's
//    ("").
//
// Pure functions of their arguments; called from the coordinator's loop (AttemptLauncher), any
// thread safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "common/trainjob/trainjob_model.h"
#include "trainlet/runtime_plugin.h"
#include "trainlet/v1/launch.pb.h"
#include "trainlet/v1/operator.pb.h"

namespace trainlet::coordinator {

// The argv[0] of the built-in initializer (the agent finds it beside trainlet-agent).
inline constexpr const char* kInitializerBinary = "trainlet-initializer";

struct StepSpec {
  std::string name;
  uint32_t replicas = 1;
  std::vector<std::string> argv;
  std::vector<std::pair<std::string, std::string>> env;  // in order; no key twice
  // Names as the plan says them: "" for the main replicated job.
  std::vector<v1::StepDependency> depends_on;
  // Its container's securityContext.runAsUser / runAsGroup (WorkerSpec.run_as_user).
  std::optional<int64_t> run_as_user, run_as_group;
  // Its container's securityContext.allowPrivilegeEscalation (WorkerSpec).
  std::optional<bool> allow_privilege_escalation;
  // Its pod's securityContext.fsGroup (WorkerSpec.fs_group).
  std::optional<int64_t> fs_group;
  // WorkerSpec.cwd of its workers: its own container's workingDir, under the job's shared
  // directory for a trainlet.io/working-dir: shared job (working_dir.h's WorkerCwdFor).
  std::string cwd;
};

struct AttemptSteps {
  std::vector<StepSpec> steps;                      // every step, each after its dependencies
  std::vector<v1::StepDependency> main_depends_on;  // `node`'s dependsOn
  bool empty() const { return steps.empty() && main_depends_on.empty(); }
};

// The steps of `job` on `runtime`. Errors (Invalid, naming the TrainJob and the runtime's path):
// a step with no container, or with no command that is not a built-in initializer; a step whose
// replicas is below 1.
Result<AttemptSteps> StepsOf(const trainjob::TrainJob& job,
                             const trainjob::TrainingRuntime& runtime);

// Warnings about `job` on `runtime` that nothing else reports: a spec.initializer.X whose runtime
// has no X-initializer step (nothing runs it).
std::vector<std::string> StepWarnings(const trainjob::TrainJob& job,
                                      const trainjob::TrainingRuntime& runtime);

// One step worker of an attempt, as laid out.
struct StepWorker {
  uint32_t rank = 0;        // global, from the main world size up
  uint32_t local_rank = 0;  // the replica's index on its node
  size_t node = 0;          // index into the placement
  const StepSpec* step = nullptr;
};

// The step workers of an attempt laid out as `layout` (whose ranks make the main world).
std::vector<StepWorker> LayOutSteps(const AttemptSteps& steps, const AttemptLayout& layout);

// Adds the step workers to `plans` (one per node, from RenderAttempt) and fills each plan's
// LaunchPlan.steps. A no-op when `steps` is empty.
void AddStepsToPlans(const AttemptSteps& steps, const AttemptLayout& layout,
                     std::vector<v1::LaunchPlan>& plans);

// Adds the step workers of the attempt to `status.ranks` (Pending, RankStatus.step set) on
// `nodes` (the placement, indexed like layout.nodes), and records each step's ranks in
// `status.attempt_steps`.
void AddStepRanks(const AttemptSteps& steps, const AttemptLayout& layout,
                  const std::vector<std::string>& nodes, uint32_t attempt, v1::JobStatus& status);

// The global rank of the `index`-th worker (by rank) of step `step` in `status`; "" names the
// main one, whose index is its global rank. nullopt when the step has no such worker.
std::optional<uint32_t> StepWorkerRank(const v1::JobStatus& status, const std::string& step,
                                       uint32_t index);

// Whether `rank` of attempt `attempt` in `status` is a worker of a replicated job beside the main
// one (an initializer): it takes part in none of the training's fences, so its exit (0, before
// the main ranks start) fails none. False for a main rank, and for a rank `status` does not know.
bool IsStepWorker(const v1::JobStatus& status, uint32_t attempt, uint32_t rank);

// The start timeout's clock for a Starting attempt: from when it counts (the attempt's start, or
// its last step progress when later), or nullopt when no Pending rank counts. A Pending rank does
// not count while a step worker on its node runs: it may be held by a dependency that worker has
// still to meet (an initializer that downloads for an hour must not time the attempt out). On
// more than one node, nor while a step worker runs on another node once its own node's step
// workers came (the dependency is met on every node, step_release.h).
std::optional<int64_t> StartClockMs(const v1::JobStatus& status, int64_t attempt_started_ms);

}  // namespace trainlet::coordinator
