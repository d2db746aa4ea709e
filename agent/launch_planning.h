// Launch planning: turning a coordinator's LaunchPlan into the WorkerLaunches of this node.
//
// PlanLaunches is a pure function of the plan and of what the caller says about the node (its
// name, state dir, topology, accelerator plugins, the attempt's rendezvous env, the ranks already
// running): no files, no clock, no logging, so every rule below is checked by a unit test
// (tests/agent/launch_planning_test.cpp). The agent writes the plan's files (WritePlanFiles) and
// starts the launches under a step; it also logs the notes PlanLaunches returns.
//
// A rank's env, from weakest to strongest (a stronger source overwrites a weaker one's key):
//   1. its binding's env (visible devices, TRAINLET_CPUSET): only keys nobody else sets;
//   2. the plan's env for the worker, with $(NAME) expanded to the node env's values;
//   3. the node env (TRAINLET_NODE, TRAINLET_WORK_DIR, TRAINLET_EXEC, and the workspace env:
//      TRAINLET_WORKSPACE, TRAINLET_DATASET_DIR, TRAINLET_MODEL_DIR, TRAINLET_CACHE_DIR);
//   4. the attempt's rendezvous env (TRAINLET_RENDEZVOUS_ENDPOINT, TRAINLET_RENDEZVOUS_TOKEN);
//   5. the attempt's progress env (KUBEFLOW_TRAINER_SERVER_URL, _CA_CERT, _TOKEN), so a plan
//      cannot point a rank's progress at another server.
//
// Any thread may call the pure functions; WritePlanFiles touches the filesystem.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "agent/rank_binding.h"
#include "agent/step/spare_files.h"
#include "agent/worker_supervisor.h"
#include "common/status.h"
#include "trainlet/accelerator_plugin.h"
#include "trainlet/v1/launch.pb.h"
#include "trainlet/v1/node.pb.h"

namespace trainlet::agent {

// Where a job's files live on a node, under the agent's state dir.
std::string JobWorkDir(const std::string& state_dir, const std::string& job);
std::string RankLogPath(const std::string& state_dir, const std::string& job, uint32_t attempt,
                        uint32_t rank);
// The job's per-node workspace, shared by every step of the job on this node:
// <work dir>/workspace, holding dataset/ and model/ (what Kubeflow's runtimes call
// /workspace/dataset and /workspace/model).
std::string JobWorkspaceDir(const std::string& work_dir);
// The node's initializer cache, shared by its jobs: <state dir>/cache.
std::string NodeCacheDir(const std::string& state_dir);
// The workspace env of a job's processes, with the real paths: TRAINLET_WORKSPACE,
// TRAINLET_DATASET_DIR, TRAINLET_MODEL_DIR and TRAINLET_CACHE_DIR. trainlet-step changes
// TRAINLET_DATASET_DIR and TRAINLET_MODEL_DIR to /workspace/dataset and /workspace/model when
// it binds the workspace on /workspace (agent/step/workspace_mount.h).
std::map<std::string, std::string> WorkspaceEnvFor(const std::string& work_dir,
                                                   const std::string& state_dir);
// Not pure: creates the job's workspace with dataset/ and model/, and the node's cache dir, each
// 0700 (the workers run as the agent's user). The error names the dir that could not be made.
// With `spares`, a missing workspace dir is a spare dir renamed into place where one is left
// (agent/step/spare_files.h): no inode allocated while the launch waits.
Status MakeJobWorkspace(const std::string& state_dir, const std::string& job,
                        step::SpareFiles* spares = nullptr);

// The env every process of a job gets from this node (ranks and exec sessions): TRAINLET_NODE,
// TRAINLET_WORK_DIR, TRAINLET_EXEC and WorkspaceEnvFor's.
std::map<std::string, std::string> NodeEnvFor(const std::string& node, const std::string& work_dir,
                                              const std::string& exec_binary,
                                              const std::string& state_dir);

// argv[0] exactly "trainlet-initializer" names the built-in initializer beside the agent.
inline constexpr char kInitializerName[] = "trainlet-initializer";

// Expands $(NAME) references to `vars`' values, as Kubernetes does for container env; anything
// else, including unknown names and an unclosed "$(", is left as written.
std::string ExpandPlanVars(const std::string& value,
                           const std::map<std::string, std::string>& vars);

// OK for a plan file's path that names a file inside the work dir: not empty, relative, and with
// no ".." component. Invalid "plan file <path>: must be a relative path inside the work dir"
// otherwise.
Status CheckPlanFilePath(const std::string& path);

// What PlanLaunches needs to know of this node and attempt. Not owned: `node_info` and `plugins`
// must outlive the call.
struct NodeLaunchContext {
  std::string node;         // TRAINLET_NODE
  std::string state_dir;    // work dirs and logs live under it (JobWorkDir, RankLogPath)
  std::string exec_binary;  // TRAINLET_EXEC
  std::string shared_dir;   // the agent's shared_dir, "" for none (working_dirs.h)
  // The file argv[0] "trainlet-initializer" runs (beside the agent); "": argv is left as is.
  std::string initializer_binary;
  // The initializers' cache cap, bytes (TRAINLET_CACHE_MAX_BYTES); 0: none.
  uint64_t cache_max_bytes = 0;
  const v1::NodeInfo* node_info = nullptr;  // topology and accelerators, for the bindings
  const std::vector<std::unique_ptr<AcceleratorPlugin>>* plugins = nullptr;  // visible-devices env
  std::map<std::string, std::string> rendezvous_env;  // RendezvousServer::AddAttempt's answer
  std::map<std::string, std::string> progress_env;    // ProgressEndpoint::RankEnv; {} when off
  std::set<uint32_t> running;  // ranks of this attempt already running here (a repeated plan)
  bool cpu_affinity = true;    // platform::CpuAffinitySupported()
  // Whether this process may run on every CPU listed (CpusAvailableHere); unset: it may.
  std::function<bool(const std::vector<unsigned>&)> cpus_available;
  // The attempt's CPUs on this node (CpuAllotment); empty: the whole node's, as before.
  std::vector<unsigned> cpu_grant;
};

struct PlannedLaunches {
  std::vector<WorkerLaunch> launches;  // in plan order, without the ranks already running
  // Parallel to `launches`: the rank's binding, for its Started event; nullopt when unbound.
  std::vector<std::optional<RankBinding>> bindings;
  // Some rank has a binding that is reported (TRAINLET_CPUSET) but not applied, because the
  // platform has no CPU affinity API.
  bool cpus_unsupported = false;
  // Not empty: the first binding whose CPUs this machine lacks (an impersonated topology), as a
  // line to log; that binding is reported, not applied.
  std::string cpus_unavailable;
};

// The launches of `plan` on this node, by the rules at the top of this file.
PlannedLaunches PlanLaunches(const v1::LaunchPlan& plan, const NodeLaunchContext& node);

// Not pure: writes the plan's files under `work_dir` (created by the caller), each with its mode
// (0644 when unset), stopping at the first path CheckPlanFilePath refuses or file that cannot be
// written. The error is the reason every rank of the plan fails to start.
Status WritePlanFiles(const v1::LaunchPlan& plan, const std::string& work_dir);

}  // namespace trainlet::agent
