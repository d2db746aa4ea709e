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
#include <functional>
#include <map>
#include <set>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/trainjob/trainjob_model.h"
#include "coordinator/gang_planner.h"
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

// A TrainJob annotation overriding the runtime's failurePolicy.maxRestarts for that job.
inline constexpr std::string_view kMaxRestartsAnnotation = "trainlet.io/max-restarts";
inline constexpr long kMaxRestartsLimit = 1000;  // the largest value the annotation accepts

// How many times a failed attempt of `job` may be restarted: the annotation when set, else the
// runtime's failurePolicy.maxRestarts (0 when absent). Invalid, naming the annotation, unless
// its value is a plain integer from 0 to kMaxRestartsLimit.
Result<uint32_t> RestartLimit(const trainjob::TrainJob& job, const trainjob::TrainingRuntime& runtime);

struct JobControllerOptions {
  std::chrono::milliseconds restart_backoff{250};       // first restart delay; doubles each time
  std::chrono::milliseconds max_restart_backoff{60000};
  uint32_t stop_grace_ms = 10000;                       // SIGTERM -> SIGKILL for stopped ranks
  // Apply refuses new work when the state dir's file system has less than this free (or is
  // read-only), so a filling disk stops intake before a write fails halfway. 0: no check.
  uint64_t min_free_bytes = 1 << 20;
  std::string exec_endpoint;    // advertised exec endpoint, for launchers (mpi)
  // A Starting attempt whose ranks have not all reported Started this long after it was placed
  // fails with cause StartTimeout, naming the nodes that never reported (a plan or a port
  // reservation was lost): a job never hangs in Starting.
  std::chrono::milliseconds start_timeout{60000};
  // Picks a job's runtime plugin from its framework and runtime labels; empty means
  // SelectRuntimePlugin (the built-ins). Tests put fake plugins here.
  std::function<const RuntimePlugin*(std::string_view framework,
                                     const std::map<std::string, std::string>& labels)>
      select_plugin;
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
  // Sets spec.suspend, as `apply` of the same TrainJob with only suspend changed does (the
  // stored spec is rewritten). Suspending stops every rank of the attempt (its record ends
  // "Stopped", not counted against maxRestarts) and sets condition Suspended; resuming makes
  // the job Pending, and its next placement is a new attempt. Stored before it returns.
  // NotFound if absent; Invalid when the job has finished or is being deleted; kIo from the store
  // (and, for a resume, from the free-space check Apply makes), with memory left as it was.
  Result<v1::SuspendJobResult> SetSuspend(const std::string& name, bool suspend, int64_t now_ms);

  // Fails jobs whose active deadline has passed, then places whatever waits and can be placed now.
  void Schedule(int64_t now_ms);
  void OnWorkerEvent(const std::string& node, const v1::WorkerEvent& event, int64_t now_ms);
  // A node's answer to ReservePorts (job_ports.cpp). Once every node of the attempt has its
  // ports, the plugin plans again with them and the plans are sent. An answer with an error
  // fails the attempt naming the node (normal restart path); an answer for an attempt that is
  // not waiting for ports (stale, duplicate) is dropped, and any ports it holds are given back.
  void OnPortsReserved(const std::string& node, const v1::PortsReserved& reserved,
                       int64_t now_ms);
  // The node's ranks are given up and their attempts fail. No restart is placed before
  // `hold_until_ms`: the node may still run the old ranks until its partition grace runs out,
  // and two attempts of a job must never run at once.
  void OnNodeLost(const std::string& node, int64_t now_ms, int64_t hold_until_ms = 0);
  // A node (re-)registered reporting what it runs: ranks of live attempts placed there are
  // adopted; anything of another attempt, or of a job that is gone, is told to stop.
  void ReconcileNode(const std::string& node,
                     const google::protobuf::RepeatedPtrField<v1::RunningWorker>& running,
                     int64_t now_ms);
  // Nodes that hold ranks of a Starting or Running attempt.
  std::set<std::string> PlacedNodes() const;
  // Writes every job changed since the last call. Errors are logged and retried next call.
  Status Flush();

  // Placement constraints (job_placement.cpp).
  // What the placed jobs ask of each node: a job's resourcesPerNode counts on every node where
  // one of its ranks has not ended.
  std::map<std::string, Resources> UsedResources() const;
  // Drain --force: fails the current attempt of every job with a live rank on `node`, with cause
  // `cause` (each restarts elsewhere, within its restart limit). Returns the jobs it failed.
  std::vector<std::string> FailJobsOnNode(const std::string& node, const std::string& cause,
                                          int64_t now_ms);
  // The jobs with a live rank on `node`, and how many such ranks there are.
  std::vector<std::string> JobsOnNode(const std::string& node, uint32_t* live_ranks) const;
  // When Schedule next has timed work to do (a restart backoff ending, an active deadline
  // passing, a start timeout); INT64_MAX when none.
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
  // An attempt placed and stored whose nodes are reserving ports; its plans go out once all
  // have answered (job_ports.cpp). Not stored: after a coordinator restart the start timeout
  // fails such an attempt and it is placed again.
  struct PortWait {
    uint32_t attempt = 0;
    PlanRequest request;           // Render's input; PlacedNode::ports filled as answers come
    AttemptLayout layout;          // the plugin's layout of the attempt (attempt_plan.h)
    std::vector<uint32_t> wanted;  // ports per node rank (0: that node reserves none)
    std::vector<bool> answered;    // per node rank
  };
  struct Job {
    JobRecord record;
    trainjob::TrainJob spec;
    trainjob::TrainingRuntime runtime;
    const RuntimePlugin* plugin = nullptr;  // null: stored, waits for a plugin trainlet lacks
    PlanRequest plan_template;              // argv, env, num_proc_per_node
    uint32_t procs_per_node = 1;
    int64_t not_before_ms = 0;              // restart backoff
    std::string launcher_secret;            // the attempt's launcher secret key (never stored)
    GangRequest gang;  // resources, nodeSelector, tolerations; sizes are set when placing
    std::optional<PortWait> port_wait;  // set while the attempt's nodes reserve ports
    bool dirty = false;
  };

  Result<std::unique_ptr<Job>> BuildJob(const trainjob::TrainJob& spec,
                                        const trainjob::TrainingRuntime& runtime,
                                        std::vector<std::string>& warnings) const;
  const trainjob::TrainingRuntime* FindRuntime(const std::string& kind,
                                               const std::string& name) const;
  std::map<std::string, uint32_t> UsedSlots() const;
  // Every registered node as the planner sees it, `used` slots taken.
  std::vector<NodeCapacity> Capacity(const std::map<std::string, uint32_t>& used) const;
  // Resources, nodeSelector and tolerations of the job's spec and runtime, into job.gang.
  // Invalid (naming the field) for a quantity that does not parse.
  Status FillGangRequest(Job& job, std::vector<std::string>& warnings) const;
  bool TryPlace(Job& job, std::map<std::string, uint32_t>& used, int64_t now_ms);
  void Transition(Job& job, int trigger, const std::string& reason, const std::string& message,
                  int64_t now_ms);
  void FailAttempt(Job& job, const std::string& cause, int64_t now_ms);
  void StopAttempt(Job& job, const std::string& reason);
  // By value: it may erase the job that owns the caller's string.
  void MaybeFinishDelete(std::string name);
  void MarkDirty(Job& job);

  // Reserve-then-launch and the start timeout (job_ports.cpp).
  void SendReservePorts(const Job& job, uint32_t attempt, uint32_t count, const std::string& node);
  // A node (re-)registered: asks it again for the ports of every attempt still waiting for them.
  void ResendReservePorts(const std::string& node);
  // Called once the attempt is stored: sends ReservePorts to every node whose share of `layout`
  // needs ports and returns true (the plans wait), or returns false when none does (send the
  // plans now).
  bool RequestPorts(Job& job, const PlanRequest& request, const AttemptLayout& layout);
  // Every node holds its ports: renders the plans with them and sends them.
  void LaunchWithPorts(Job& job, int64_t now_ms);
  // The attempt stopped while reserving ports: no plan went out, so its ranks never existed and
  // end here (Stopped) rather than wait for events that will never come.
  void EndPortWait(Job& job);
  // Fails every Starting attempt past its start timeout.
  void EnforceStartTimeouts(int64_t now_ms);
  // When the job's current attempt times out in Starting; INT64_MAX when it cannot.
  int64_t StartDeadlineMs(const Job& job) const;

  // Lifecycle: deadlines, suspend and restart limits (job_lifecycle.cpp).
  // A change of spec.suspend, prepared in full before anything is stored or sent.
  struct SuspendFlip {
    Job* job = nullptr;
    bool suspend = false;
    std::string spec_yaml;  // the spec as it reads after the change
    v1::JobStatus status;   // the status after the change
  };
  // When the job's activeDeadlineSeconds runs out (counted from creation); INT64_MAX for none.
  static int64_t DeadlineMs(const Job& job);
  // Fails every live job whose deadline has passed, with reason DeadlineExceeded.
  void EnforceDeadlines(int64_t now_ms);
  // Invalid when the job has finished or is being deleted. `how` says who asked, for the event.
  Result<SuspendFlip> PrepareSuspend(Job& job, bool suspend, std::string spec_yaml,
                                     const std::string& how, int64_t now_ms) const;
  // Writes the flip's spec and status; the caller holds a store transaction.
  Status StoreSuspend(const SuspendFlip& flip);
  // Once stored: memory takes the flip, and a suspend stops the attempt's ranks.
  void CommitSuspend(SuspendFlip flip);
  // Apply's answer for a TrainJob whose name is taken: nullopt when `spec` is the stored one
  // (unchanged), a flip when it differs only in spec.suspend, kExists for any other change.
  Result<std::optional<SuspendFlip>> CompareWithStored(Job& job, const trainjob::TrainJob& spec,
                                                       const std::string& source,
                                                       int64_t now_ms) const;

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
