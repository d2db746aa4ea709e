// JobController: turns applied TrainJobs into placed, launched and finished gangs.
//
// It owns the in-memory view of every job (the job map, in creation order), writes each change
// through JobStore, and moves each job along the lifecycle table (job_state_machine.h) as worker
// events arrive. It delegates, and owns each of these:
//   - RuntimeCatalog (runtime_catalog.h): the shipped and applied (Cluster)TrainingRuntimes, and
//     what Apply does with runtime documents.
//   - AttemptLauncher (attempt_launcher.h): placing an attempt (GangPlanner, the runtime plugin
//     through attempt_plan.h), waiting for its nodes' ports (PortReservationWaits, its own),
//     sending its plans, the start timeout, and stopping an attempt. It reports back through
//     AttemptLauncher::Owner, which JobController implements: phase moves, failing an attempt,
//     and store writes stay here.
//   - ExecAuthority (exec_authority.h): per-attempt launcher keys, the exec allowlist, and where
//     a trainlet-exec request may run (exec()).
//   - AgentCommands (agent_commands.h): every command sent to an agent, over the NodeSink.
//   - AdmissionStep (admission_step.h): Kueue's queues before placement (JobAdmitter's pass and
//     carrying out its admissions, preemptions and waits; admission checks). It reports back
//     through AdmissionStep::Owner, which JobController implements.
// It applies, owning no state of theirs: the phase table of job_state_machine.h; the pure rules
// of lifecycle_rules.h (restart limit and backoff, deadlines, the edits of a suspend);
// placement_inputs.h, which builds what the planner is given (a job's request, the nodes' room);
// apply_transaction.h, which parses and stores one applied file before memory changes;
// job_entry.h, which turns a spec and its runtime into the job this map holds (a JobEntry);
// rank_event_fold.h, which folds a worker event into its rank and says what the attempt does
// next; job_progress.h, which folds a progress update into the status and judges stalls (its
// ProgressWatch, the stall clocks and write coalescing, is owned here); and node_reconcile.h, which
// says what of a re-registering node's workers to adopt or stop; and queue_in_use.h, which removes
// the ResourceFlavors and ClusterQueues deleted while in use once nothing uses them (the catalog
// keeps their Terminating marks). Who owns what: the job map, the
// store writes and every phase change are JobController's; the runtimes, port waits and launcher
// secrets are the delegates'.
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
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/trainjob/trainjob_model.h"
#include "coordinator/admission_step.h"
#include "coordinator/agent_commands.h"
#include "coordinator/apply_transaction.h"
#include "coordinator/attempt_launcher.h"
#include "coordinator/attempt_plan.h"
#include "coordinator/delete_gate.h"
#include "coordinator/exec_authority.h"
#include "coordinator/failure_rules.h"
#include "coordinator/gang_planner.h"
#include "coordinator/job_admitter.h"
#include "coordinator/job_entry.h"
#include "coordinator/job_progress.h"
#include "coordinator/job_state_machine.h"
#include "coordinator/job_store.h"
#include "coordinator/lifecycle_rules.h"
#include "coordinator/missed_purges.h"
#include "coordinator/node_registry.h"
#include "coordinator/node_usage.h"
#include "coordinator/placement_inputs.h"
#include "coordinator/port_reservation_waits.h"
#include "coordinator/queue_catalog.h"
#include "coordinator/runtime_catalog.h"
#include "trainlet/runtime_plugin.h"
#include "trainlet/v1/envelope.pb.h"

namespace trainlet::coordinator {

struct JobControllerOptions {
  std::chrono::milliseconds restart_backoff{250};  // first restart delay; doubles each time
  std::chrono::milliseconds max_restart_backoff{60000};
  uint32_t stop_grace_ms = kDefaultStopGraceMs;  // SIGTERM -> SIGKILL for stopped ranks
  // The warning signal to SIGTERM of a preemption, drain --force and the active deadline, for jobs
  // without trainlet.io/preemption-grace-seconds (lifecycle_rules.h, StopWarningOf).
  std::chrono::milliseconds preemption_grace{kDefaultPreemptionGraceSeconds * 1000};
  // Whether jobs with an activeDeadlineSeconds and no trainlet.io/deadline-warning annotation
  // get the warning before it (lifecycle_rules.h, DeadlineWarningWanted).
  bool deadline_warning = true;
  // Apply refuses new work when the state dir's file system has less than this free (or is
  // read-only), so a filling disk stops intake before a write fails halfway. 0: no check.
  uint64_t min_free_bytes = 1 << 20;
  std::string exec_endpoint;  // advertised exec endpoint, for launchers (mpi)
  // A Starting attempt whose ranks have not all reported Started this long after it was placed
  // fails with cause StartTimeout, naming the nodes that never reported (a plan or a port
  // reservation was lost): a job never hangs in Starting.
  std::chrono::milliseconds start_timeout{60000};
  // How long a finished (Succeeded or Failed) job is kept before it is deleted, for jobs whose
  // runtime sets no ttlSecondsAfterFinished; nullopt: kept until an operator deletes it.
  std::optional<std::chrono::seconds> finished_job_ttl;
  // Attempts failed in a row for the infrastructure (FailureKind::kInfrastructure: a plan that
  // never reached its node, a lost node) restart with the usual backoff and are not counted
  // against maxRestarts; past this many, each restart waits max_restart_backoff, with reason
  // WaitingForInfrastructure, so a cluster that cannot deliver plans is not hammered.
  uint32_t max_infrastructure_retries = 10;
  // Picks a job's runtime plugin from its framework and runtime labels; empty means
  // SelectRuntimePlugin (the built-ins). Tests put fake plugins here.
  std::function<const RuntimePlugin*(std::string_view framework,
                                     const std::map<std::string, std::string>& labels)>
      select_plugin;
  std::string server_public_key;  // the coordinator's CURVE public key
  // Queues (issue 14): where jobs without kueue.x-k8s.io/queue-name wait, and fair sharing.
  JobAdmitterOptions admission;
  // The access policy's run-as rules (access_policy_run_as.h): may `user` run `job`'s ranks as
  // the uids and gids its securityContext asks? Checked for each new job at apply (the apply is
  // refused) and again at each placement, for the user who applied it (AttemptLauncher). Unset:
  // nothing is checked.
  std::function<Status(const JobEntry& job, const std::string& user)> check_run_as;
};

class JobController : private AttemptLauncher::Owner, private AdmissionStep::Owner {
 public:
  JobController(JobStore* store, NodeRegistry* registry, NodeSink* sink,
                JobControllerOptions options = {});

  // Loads the runtimes trainlet ships (every *.yaml in runtimes_dir; "" for none), then the
  // stored runtimes and jobs. Errors name the file.
  Status Load(const std::string& runtimes_dir);

  // Parses, validates and stores the TrainJobs and runtimes of one file, all or nothing. `by`,
  // the operator's user name ("" for none), is named in the events the file causes (created by,
  // suspended by).
  Result<v1::ApplyResult> Apply(const std::string& yaml, const std::string& source, int64_t now_ms,
                                const std::string& by = "");
  // The same for a file ApplyParser parsed and checked off the loop (apply_parser.h). Such a
  // file was parsed without the stored documents, so one that names a held TrainJob should go
  // through the first form (OperatorService::OnApplyParsed does).
  Result<v1::ApplyResult> Apply(trainjob::ParsedFile parsed, const std::string& source,
                                int64_t now_ms, const std::string& by = "");
  // The job of a name, as ApplyTransaction asks (held jobs are laid under a re-apply).
  ApplyTransaction::HeldJob Held() const;
  // Asks every rank of the job to stop and removes the job once none runs. NotFound if absent.
  // `by` (the operator's user name, "" for none) is named in the Deleting event and the log.
  // The job stays (Terminating) while a rank on a Lost node is not confirmed stopped; `force`
  // removes it without waiting for any rank (delete_gate.h).
  Result<v1::DeleteJobResult> Delete(const std::string& name, int64_t now_ms,
                                     const std::string& by = "", bool force = false);
  // Sets spec.suspend, as `apply` of the same TrainJob with only suspend changed does (the
  // stored spec is rewritten). Suspending stops every rank of the attempt (its record ends
  // "Stopped", not counted against maxRestarts) and sets condition Suspended; resuming makes
  // the job Pending, and its next placement is a new attempt. Stored before it returns.
  // NotFound if absent; Invalid when the job has finished or is being deleted; kIo from the store
  // (and, for a resume, from the free-space check Apply makes), with memory left as it was.
  // `by` (the operator's user name, "" for none) is named in the Suspended/Resumed event.
  Result<v1::SuspendJobResult> SetSuspend(const std::string& name, bool suspend, int64_t now_ms,
                                          const std::string& by = "");
  // Preempts the job `key` (job_lifecycle.cpp; the rule is PreparePreemption): suspended and
  // requeued, as Kueue does, not failed, and no restart used up. Its ranks get the job's warning
  // signal (trainlet.io/preemption-signal, SIGUSR1) and grace before SIGTERM. `by_text` names
  // the preemptor for the events ("Preempted by team-a/llm-7 (priority 1000)"). A resume
  // (SetSuspend, or admission) starts a new attempt whose ranks get TRAINLET_PREEMPTED=1.
  // Stored before it returns. NotFound if absent; Invalid when finished, being deleted or
  // suspended already; kIo from the store, with memory left as it was.
  Result<v1::SuspendJobResult> Preempt(const std::string& key, const std::string& by_text,
                                       int64_t now_ms) override;

  // Marks admission check `check` of the job's ClusterQueue Ready for job `key`
  // (admission_step.h; `trainletctl admit-check`), naming `by` in its events; once every
  // check of its admission is Ready the job is placed. Stored before it returns. NotFound if
  // absent; Invalid when finished or being deleted, or when its ClusterQueue has no such check;
  // kIo from the store, with memory left as it was.
  Result<v1::Kueue14AdmitCheckResult> AdmitCheck(const std::string& key, const std::string& check,
                                                 int64_t now_ms, const std::string& by);
  // The queues' view (job_admitter.h): usage per ClusterQueue and the last pass's waits.
  const JobAdmitter& admitter() const { return admission_.admitter(); }
  // What the admission passes did since the last call (preemptions, admission wait times).
  AdmissionStats TakeAdmissionStats() { return admission_.TakeStats(); }

  // Fails jobs whose active deadline has passed, then places whatever waits and can be placed now.
  void Schedule(int64_t now_ms);
  void OnWorkerEvent(const std::string& node, const v1::WorkerEvent& event, int64_t now_ms);
  // A node's answer to ReservePorts (AttemptLauncher). Once every node of the attempt has its
  // ports, the plugin renders the plans with them and they are sent. An answer with an error
  // fails the attempt naming the node (normal restart path); an answer for an attempt that is
  // not waiting for ports (stale, duplicate) is dropped, and any ports it holds are given back.
  void OnPortsReserved(const std::string& node, const v1::PortsReserved& reserved, int64_t now_ms);
  // A node's ProgressReport (job_progress_steps.cpp): each update of a job's current attempt
  // from a node of its placement becomes the job's trainer_status (FoldProgress); the rest are
  // dropped. Memory changes now; the store write is coalesced (job_progress.h). Returns what
  // happened to each update, in order, for the metrics.
  std::vector<ProgressFoldResult> OnProgressReport(const std::string& node,
                                                   const v1::ProgressReport& report,
                                                   int64_t now_ms);
  // The node's ranks are given up and their attempts fail. No restart is placed before
  // `hold_until_ms`: the node may still run the old ranks until its partition grace runs out,
  // and two attempts of a job must never run at once.
  void OnNodeLost(const std::string& node, int64_t now_ms, int64_t hold_until_ms = 0);
  // A node (re-)registered reporting what it runs: ranks of live attempts placed there are
  // adopted; anything of another attempt, or of a job that is gone, is told to stop. Jobs
  // deleted while it was away get their PurgeJob now (missed_purges.h).
  void ReconcileNode(const std::string& node,
                     const google::protobuf::RepeatedPtrField<v1::RunningWorker>& running,
                     int64_t now_ms);
  // Jobs written per store transaction by Flush.
  static constexpr size_t kFlushBatch = 100;
  // Writes every job changed since the last call, kFlushBatch jobs per transaction. Errors are
  // logged and retried next call.
  Status Flush() override;

  // What the jobs hold on each node now: slots, resources, which jobs run there, and the nodes
  // of live attempts (node_usage.h).
  NodeUsage Usage() const;
  // Drain --force: fails the current attempt of every job with a live rank on `node`, with cause
  // `cause` (each restarts elsewhere, within its restart limit). Returns the jobs it failed.
  std::vector<std::string> FailJobsOnNode(const std::string& node, const std::string& cause,
                                          int64_t now_ms);
  // When Schedule next has timed work to do (a restart backoff ending, an active deadline
  // passing, a start timeout, a progress timeout, a coalesced progress write); INT64_MAX when
  // none.
  int64_t NextWakeMs() const;

  // Who may start remote commands through trainlet-exec, and where: the exec allowlist
  // (LauncherKeys), ResolveExec, and whether an attempt may run now (AttemptActive).
  const ExecAuthority& exec() const { return exec_; }

  // Kueue's queue objects (queue_catalog.h): applied with the jobs, read by admission and by
  // OperatorService (operator_queues.cpp), which deletes through it with store().
  const RuntimeCatalog& runtimes() const { return runtimes_; }
  QueueCatalog& queues() { return queues_; }
  const QueueCatalog& queues() const { return queues_; }
  JobStore& store() { return *store_; }

  const v1::JobStatus* Find(const std::string& name) const;
  std::vector<const v1::JobStatus*> List() const;
  // Bumped on every change of any job; waiters compare it to skip needless checks.
  uint64_t generation() const override { return generation_; }

 private:
  // Why about 40 methods, past the ~25 rule: the public ones are the coordinator's whole view of
  // jobs (its loop, OperatorService, ExecRelay and CoordinatorOps call them); the private ones are
  // the lifecycle steps that need the job map, the store or the phase table. Whatever needs none
  // of them lives in the types listed at the top of this file. The count grew again with queues
  // (Preempt, the queue accessors); the admission steps moved into AdmissionStep, behind an
  // Owner interface, as AttemptLauncher was (FindJob and ResumeAdmitted serve it). Issue 18 added
  // three (FailAttempt of an AttemptFailure, NoteFinished, EnforceTtl), whose rules live in
  // failure_rules.h and lifecycle_rules.h.
  using Job = JobEntry;  // job_entry.h: what BuildJobEntry and NewJobEntry make

  // The job joins the job map (last in placement order) and the exec authority.
  void Adopt(std::unique_ptr<Job> job);
  // AttemptLauncher::Owner: phase moves, failed attempts and dirty marks, here and for the
  // launcher.
  void Transition(Job& job, JobTrigger trigger, const std::string& reason,
                  const std::string& message, int64_t now_ms) override;
  void FailAttempt(Job& job, const std::string& cause, int64_t now_ms,
                   FailureKind kind = FailureKind::kJob) override;
  // Ends the current attempt as failed, then restarts or fails the job as the failure rules say
  // (failure_rules.h), recording the rule that fired. The override above is this one for a
  // failure of no one worker (failure.message is the cause); an infrastructure failure (`kind`)
  // is restarted by RetryForInfrastructure without asking the rules and is not counted.
  void FailAttempt(Job& job, const AttemptFailure& failure, int64_t now_ms,
                   FailureKind kind = FailureKind::kJob) override;
  // FailAttempt's restart of an attempt failed for the infrastructure: not counted.
  void RetryForInfrastructure(Job& job, const std::string& cause, int64_t now_ms);
  void MarkDirty(Job& job) override;
  // By value: it may erase the job that owns the caller's string.
  void MaybeFinishDelete(std::string name, int64_t now_ms);

  // Progress (job_progress_steps.cpp): the stall rule of every Running job, and the coalesced
  // writes of progress updates.
  void EnforceProgress(int64_t now_ms);
  // AdmissionStep::Owner (the queues' step, admission_step.h): the job map's lookup, and the
  // resume of a preempted job admitted again (SetSuspend). MarkDirty, generation and Preempt
  // serve it too.
  JobEntry* FindJob(const std::string& key) override;
  Result<v1::SuspendJobResult> ResumeAdmitted(const std::string& key, const std::string& by,
                                              int64_t now_ms) override;

  // Finished jobs (job_lifecycle.cpp): the first move to Succeeded or Failed records the finish
  // time and, with a ttlSecondsAfterFinished (the runtime's, else options_.finished_job_ttl),
  // when the job is deleted; EnforceTtl deletes those whose time has come, as Delete does.
  void NoteFinished(Job& job, int64_t now_ms);
  void EnforceTtl(int64_t now_ms);
  // Lifecycle: deadlines and suspend (job_lifecycle.cpp; the rules are in lifecycle_rules.h).
  // Warns the ranks of every job whose deadline warning is due, and fails every live job whose
  // deadline has passed, with reason DeadlineExceeded.
  void EnforceDeadlines(int64_t now_ms);
  // The current attempt of `job` ended (`how`: its cause, or "all N ranks exited 0") after its
  // deadline warning: the job fails with DeadlineExceeded, with no restart, whatever the exits.
  void EndAfterDeadlineWarning(Job& job, const std::string& how, int64_t now_ms);
  // Once stored: memory takes the flip, and a suspend stops the attempt's ranks.
  void CommitSuspend(SuspendFlip flip);

  // Constant after construction.
  JobStore* store_;
  NodeRegistry* registry_;
  JobControllerOptions options_;
  JobEntryOptions entry_options_;  // what BuildJobEntry needs of options_
  // Owned by the loop.
  AgentCommands agents_;
  RuntimeCatalog runtimes_;
  QueueCatalog queues_;
  ExecAuthority exec_;             // reads jobs_ through Find()
  AttemptLauncher launcher_;       // owns the port waits; reports back through Owner (this)
  ProgressWatch progress_;         // stall clocks and coalesced progress writes
  DeleteGate deletes_{registry_};  // when a deleting job may go; delete --force
  MissedPurges missed_purges_{registry_, &agents_, store_};  // nodes away at the delete
  // Hashed: a scheduling pass looks every job up by name several times (bench/scheduler runs
  // 11,000); nothing iterates it where order matters (order_ has the creation order).
  std::unordered_map<std::string, std::unique_ptr<Job>> jobs_;
  // The jobs of jobs_ in creation order (placement is FIFO); a pass walks it without looking
  // names up. Adopt adds, MaybeFinishDelete erases, nothing else.
  std::vector<Job*> order_;
  uint64_t generation_ = 0;
  // The queues' step before placement; reports back through AdmissionStep::Owner (this).
  AdmissionStep admission_{&queues_, store_, this, options_.admission};
  // (generation_, queues_.generation()) when Schedule last found every Terminating queue object
  // still in use (queue_in_use.h): nothing to look at again before one of them moves.
  std::pair<uint64_t, uint64_t> queue_deletes_seen_{~0ull, ~0ull};
  bool scheduling_ = false;       // inside Schedule (it is not re-entered)
  int64_t last_schedule_ms_ = 0;  // now_ms of the last Schedule()
};

}  // namespace trainlet::coordinator
