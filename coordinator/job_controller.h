// JobController: turns applied TrainJobs into placed, launched and finished gangs.
//
// It owns the in-memory view of every job, writes each change through JobStore, asks the
// GangPlanner where a job goes, asks the job's runtime plugin for the launch plans, and moves
// the job along the lifecycle table (job_state_machine.h) as worker events arrive.
//
// Durability: Apply() and Delete() write before they return (the operator is acknowledged after).
// Changes made by events (a rank started or exited) are marked dirty and written together by
// Flush(), which the loop calls once per iteration, before it sends anything they cause.
//
// Owned by the coordinator's loop; no locks. Messages to agents go through NodeSink.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/trainjob/trainjob_model.h"
#include "coordinator/job_store.h"
#include "coordinator/node_registry.h"
#include "trainlet/runtime_plugin.h"
#include "trainlet/v1/envelope.pb.h"

namespace trainlet::coordinator {

class NodeSink {
 public:
  virtual ~NodeSink() = default;
  // Best effort: a node that is not connected misses the message; liveness handles the rest.
  virtual void SendToNode(const std::string& node, v1::Envelope env) = 0;
};

// Where a trainlet-exec request goes, once its key and host are checked.
struct ExecTarget {
  std::string job;
  uint32_t attempt = 0;
  std::string node;
  std::map<std::string, std::string> env;  // what every process of the job gets on that node
  uint32_t stop_grace_ms = 10000;
};

struct JobControllerOptions {
  std::chrono::milliseconds restart_backoff{1000};      // first restart delay; doubles each time
  std::chrono::milliseconds max_restart_backoff{60000};
  uint32_t stop_grace_ms = 10000;                       // SIGTERM -> SIGKILL for stopped ranks
  std::string exec_endpoint;    // advertised exec endpoint, for launchers (mpi)
  std::string server_public_key;  // the coordinator's CURVE public key
};

class JobController {
 public:
  JobController(JobStore* store, NodeRegistry* registry, NodeSink* sink,
                JobControllerOptions options = {});

  // Loads the runtimes trainlet ships (every *.yaml in runtimes_dir; "" for none), then the
  // stored runtimes and jobs. Errors name the file.
  Status Load(const std::string& runtimes_dir);

  // Parses, validates and stores the TrainJobs and runtimes of one file, all or nothing.
  Result<v1::ApplyResult> Apply(const std::string& yaml, const std::string& source,
                                int64_t now_ms);
  // Asks every rank of the job to stop and removes the job once none runs. NotFound if absent.
  Result<v1::DeleteJobResult> Delete(const std::string& name, int64_t now_ms);

  // Places whatever waits and can be placed now.
  void Schedule(int64_t now_ms);
  void OnWorkerEvent(const std::string& node, const v1::WorkerEvent& event, int64_t now_ms);
  void OnNodeLost(const std::string& node, int64_t now_ms);
  // Writes every job changed since the last call. Errors are logged and retried next call.
  Status Flush();
  // When Schedule next has timed work to do (a restart backoff ending); INT64_MAX when none.
  int64_t NextWakeMs() const;

  // The launcher key of every attempt that may start remote commands now (Starting or Running):
  // the exec endpoint's allowlist, public key -> job name.
  std::map<std::string, std::string> LauncherKeys() const;
  // Checks that `launcher_key` belongs to a live attempt and `host` (node name, hostname or
  // address) is in its placement. Errors say which, for trainlet-exec to print.
  Result<ExecTarget> ResolveExec(const std::string& launcher_key, const std::string& host) const;
  bool AttemptActive(const std::string& job, uint32_t attempt) const;

  const v1::JobStatus* Find(const std::string& name) const;
  std::vector<const v1::JobStatus*> List() const;
  // Bumped on every change of any job; waiters compare it to skip needless checks.
  uint64_t generation() const { return generation_; }

 private:
  struct Job {
    JobRecord record;
    trainjob::TrainJob spec;
    trainjob::TrainingRuntime runtime;
    const RuntimePlugin* plugin = nullptr;  // null: stored, waits for a plugin trainlet lacks
    PlanRequest plan_template;              // argv, env, num_proc_per_node
    uint32_t procs_per_node = 1;
    int64_t not_before_ms = 0;              // restart backoff
    std::string launcher_secret;            // the attempt's launcher secret key (never stored)
    bool dirty = false;
  };

  Result<std::unique_ptr<Job>> BuildJob(const trainjob::TrainJob& spec,
                                        const trainjob::TrainingRuntime& runtime,
                                        std::vector<std::string>& warnings) const;
  const trainjob::TrainingRuntime* FindRuntime(const std::string& kind,
                                               const std::string& name) const;
  std::map<std::string, uint32_t> UsedSlots() const;
  bool TryPlace(Job& job, std::map<std::string, uint32_t>& used, int64_t now_ms);
  void Transition(Job& job, int trigger, const std::string& reason, const std::string& message,
                  int64_t now_ms);
  void FailAttempt(Job& job, const std::string& cause, int64_t now_ms);
  void StopAttempt(Job& job, const std::string& reason);
  // By value: it may erase the job that owns the caller's string.
  void MaybeFinishDelete(std::string name);
  void MarkDirty(Job& job);

  JobStore* store_;
  NodeRegistry* registry_;
  NodeSink* sink_;
  JobControllerOptions options_;
  std::map<std::string, trainjob::TrainingRuntime> runtimes_;  // "<kind>/<name>"
  std::map<std::string, std::unique_ptr<Job>> jobs_;
  std::vector<std::string> order_;  // job names in creation order (placement is FIFO)
  uint64_t generation_ = 0;
  int64_t last_schedule_ms_ = 0;  // now_ms of the last Schedule()
};

}  // namespace trainlet::coordinator
