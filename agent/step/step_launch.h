// The launch file of a step (<step dir>/launch.json): everything `trainlet-step` needs to start
// the ranks of one (job, attempt) on this node, written by the agent before it spawns the step,
// and read again by a restarted agent to learn what the step runs.
//
// The environment is stored once (base_env, normally the agent's environ) plus each rank's
// overrides, and combined by BuildWorkerEnv in the step exactly as the agent combines it for the
// workers it spawns itself. The overrides every rank shares with the same value are written once
// ("env_common") and put back into each rank's env when read: StepRank::env is always whole. The
// file holds the ranks' env, which may hold secrets: it is written 0600 inside a 0700 steps
// directory.
//
// Pure data and file I/O; safe from any thread.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "agent/step/rank_identity.h"
#include "common/status.h"

namespace trainlet::step {

inline constexpr int kStepLaunchVersion = 1;

// A dependency of one replicated job on another (LaunchPlan's StepDependency): "Ready" when
// every worker of `step` in this step process has started, "Complete" when every one exited 0.
struct StepNeed {
  std::string step;    // "" names the main replicated job
  std::string status;  // "Ready" or "Complete"
  bool operator==(const StepNeed&) const = default;
};

// A replicated job whose workers wait (LaunchPlan's PlanStep).
struct StepOrder {
  std::string name;
  std::vector<StepNeed> depends_on;
  bool operator==(const StepOrder&) const = default;
};

struct StepRank {
  uint32_t rank = 0;
  uint32_t local_rank = 0;
  std::string step;  // its replicated job (WorkerSpec.step); "" for the main one
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;  // on top of StepLaunch::base_env
  std::string cwd;                         // empty: "/"
  std::string log_path;                    // stdout+stderr, appended; empty: discarded
  std::string stderr_path;                 // not empty: stderr here, log_path has stdout only
  std::vector<unsigned> cpus;              // empty: the step's own affinity
  // Who the rank runs as (rank_identity.h); empty: the step's own user. Absent in files written
  // before it.
  RunAsRequest run_as;
};

struct StepLaunch {
  std::string job;
  uint32_t attempt = 0;
  // SIGTERM to SIGKILL, when the step is asked to stop (SIGTERM) and the agent is not there to
  // escalate.
  uint32_t stop_grace_ms = 10000;
  // The agent holds an exclusive flock on `agent_lock` while it runs. When no process has held it
  // for `orphan_grace_ms` (the agent died and none was started again; the coordinator has given
  // the node up and may be restarting the job elsewhere), the step stops its ranks itself, as a
  // partitioned agent would. "" or 0: never.
  std::string agent_lock;
  uint32_t orphan_grace_ms = 0;
  // The agent also stamps agent_lock's modification time about once a heartbeat while its loop
  // runs (FileLock::Touch). A stamp that stands still for orphan_grace_ms while the lock is held
  // means an agent that is stopped (SIGSTOP) or hung: it holds the lock but will stop nothing,
  // and the coordinator restarts the job elsewhere as for a dead one, so the step stops the
  // ranks itself, as for a dead agent. false (agents before 0.3): the lock alone counts.
  bool agent_stamps = false;
  // Where the step puts its ranks so that nothing they start outlives it
  // (common/platform/process_cgroup.h): "auto" (the default, also when absent), "v2", "v1" or
  // "none". Whatever it is, the step, a child subreaper, also kills every orphan that came to it
  // before it exits.
  std::string cgroup = "auto";
  // The step was started from a trainlet-step that takes stop and warning requests
  // (step_stop.h). An older step would die of the SIGUSR2 of a warning: the agent sends it only
  // when this is true. false for files written before it.
  bool stop_requests = false;
  // Each rank's log is cut past this many bytes (log_rotation.h); 0: never (also when absent,
  // in files written before it).
  uint64_t log_max_bytes = 0;
  // Where the agent keeps empty files made ahead of need (spare_files.h): each rank's log is one
  // of them, renamed, when there is one. "" (also when absent, in files written before it): none.
  std::string spare_dir;
  std::vector<std::string> base_env;  // "K=V"
  std::vector<StepRank> ranks;
  // The replicated jobs of `ranks` that wait for others (step_gate.h); absent in files written
  // before them: nothing waits.
  std::vector<StepOrder> steps;
};

// base_env with `overrides` set on top: the first of duplicate keys wins (as getenv does),
// entries without '=' are dropped, new keys are appended in key order.
std::vector<std::string> BuildWorkerEnv(const std::vector<std::string>& base_env,
                                        const std::map<std::string, std::string>& overrides);

std::string EncodeLaunch(const StepLaunch& launch);
// Errors (Invalid) name the field at fault: "ranks[3].argv: ...".
Result<StepLaunch> DecodeLaunch(const std::string& text);

// Written to `path`.tmp (0600), then renamed over `path`.
Status WriteLaunchFile(const std::string& path, const StepLaunch& launch);
// Errors name the path: NotFound when missing, Io when unreadable, Invalid when not a launch file.
Result<StepLaunch> ReadLaunchFile(const std::string& path);

}  // namespace trainlet::step
