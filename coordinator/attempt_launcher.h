// AttemptLauncher: getting one attempt of a job onto its nodes, and off them again.
//
// Placing an attempt (Place): the GangPlanner picks the nodes from their free room; the runtime
// plugin lays the ranks out without ports (LayoutAttempt, attempt_plan.h); ExecAuthority issues
// the launcher's key pair when the layout names an exec launcher; the attempt is written into
// the job's status (placement, the laid-out ranks Pending, the attempt record) and stored before
// any agent hears of it. Then its plans go out: at once when no node wants ports, otherwise once
// every node has reserved its ports (PortReservationWaits, owned here; OnPortsReserved renders the
// plans with them through RenderAttempt). An attempt whose ranks have not all started within the
// start timeout fails (EnforceStartTimeout). Stop sends StopWorkers to every node with a live
// rank and ends a port wait, whose never-launched ranks end Stopped here.
//
// A plan can be lost (a coordinator crash after the attempt was stored, a node disconnected, an
// agent restarted before it started the ranks): ResendLostPlans sends it again to each node that
// reports not holding it (PlanDelivery, plan_delivery.h), rendering it again when this
// coordinator never sent it (attempt_launcher_resend.cpp). A start timeout on nodes known never to
// have received their plan is the infrastructure's failure, not the job's (FailureKind). The
// workers a coordinator held for their dependencies when it restarted are held again
// (RebuildHeld, step_release.h).
//
// Who owns what: the job map, every phase change and every store write stay with the Owner
// (JobController), which the launcher asks through the narrow interface below; the launcher owns
// only the port waits. It works on the JobEntry it is handed, for the duration of the call.
//
// Owned by JobController, on the coordinator's loop; no locks. `registry`, `exec`, `agents` and
// `owner` outlive it.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/status.h"
#include "coordinator/agent_commands.h"
#include "coordinator/attempt_plan.h"
#include "coordinator/attempt_steps.h"
#include "coordinator/exec_authority.h"
#include "coordinator/failure_rules.h"
#include "coordinator/job_entry.h"
#include "coordinator/job_state_machine.h"
#include "coordinator/node_registry.h"
#include "coordinator/pass_capacity.h"
#include "coordinator/plan_delivery.h"
#include "coordinator/port_reservation_waits.h"
#include "coordinator/resources.h"
#include "coordinator/step_release.h"
#include "trainlet/runtime_plugin.h"
#include "trainlet/v1/envelope.pb.h"

namespace trainlet::coordinator {

// Whose fault a failed attempt is: the job's (a rank failed or did not start: counted against
// maxRestarts) or the infrastructure's (its plan never reached a node, a node was lost: retried
// without counting, issue 19 defect 4).
enum class FailureKind { kJob, kInfrastructure };

class AttemptLauncher {
 public:
  // What the launcher asks of the owner of the job map: the launcher decides what happened to an
  // attempt, the owner moves the job's phase and writes the store.
  class Owner {
   public:
    virtual ~Owner() = default;
    // A checked move of the job's phase (job_state_machine.h); the job is stored at the next Flush.
    virtual void Transition(JobEntry& job, JobTrigger trigger, const std::string& reason,
                            const std::string& message, int64_t now_ms) = 0;
    // The current attempt failed with `cause`: it is stopped (Stop) and restarted within the
    // job's restart limit, or the job fails. An infrastructure failure is restarted without
    // counting against the limit.
    virtual void FailAttempt(JobEntry& job, const std::string& cause, int64_t now_ms,
                             FailureKind kind = FailureKind::kJob) = 0;
    // The same, naming the replicated jobs whose workers the failure hit (a start timeout, a
    // node's port error), so that failure rules with targetReplicatedJobs see them.
    virtual void FailAttempt(JobEntry& job, const AttemptFailure& failure, int64_t now_ms,
                             FailureKind kind = FailureKind::kJob) {
      FailAttempt(job, failure.message, now_ms, kind);
    }
    // The job's status changed without a phase move: store it at the next Flush.
    virtual void MarkDirty(JobEntry& job) = 0;
    // Stores every changed job now. An error means nothing was stored.
    virtual Status Flush() = 0;
  };

  struct Options {
    // A Starting attempt whose ranks have not all reported Started this long after it was placed
    // fails with cause StartTimeout (JobControllerOptions::start_timeout).
    std::chrono::milliseconds start_timeout{60000};
    // JobControllerOptions::check_run_as: a job the access policy no longer lets run as the ids
    // it asks (the policy changed since it was applied) fails at placement, reason
    // RunAsNotAllowed, before anything is placed. Unset: nothing is checked.
    std::function<Status(const JobEntry& job, const std::string& user)> check_run_as;
  };

  AttemptLauncher(const NodeRegistry* registry, ExecAuthority* exec, AgentCommands* agents,
                  Owner* owner, Options options);

  // Places `job`'s next attempt on nodes with room in `room` (this pass's free room, built once
  // per Schedule pass, which made a pass quadratic in the jobs held when it was per job, issue
  // 19 defect 1). True when placed: stored, and its plans sent or its ports asked for; `room`
  // is then charged for it. False when it waits: no room (phase reason Unschedulable), the plugin
  // refused it (the job fails, PlanRefused), its launcher keys could not be made (the attempt
  // fails), or the store refused it (the job is left as it was, to be placed again later).
  // `flavor`: the nodes its admission's ResourceFlavors allow (flavor_constraint.h); an error
  // (a flavor gone) leaves it Pending with reason Unschedulable and that message.
  bool Place(JobEntry& job, PassCapacity& room, int64_t now_ms,
             const Result<FlavorConstraint>& flavor = FlavorConstraint{});
  // `node`'s answer to ReservePorts; `job` is the entry named by `reserved.job()` (null when
  // there is none). Once every node of the attempt has its ports, the plans are rendered with
  // them and sent. An answer with an error, or plans that cannot be rendered, fail the attempt;
  // an answer nobody waits for is dropped (its ports given back if stale).
  void OnPortsReserved(const std::string& node, const v1::PortsReserved& reserved, JobEntry* job,
                       int64_t now_ms);
  // `node` (re-)registered: it is asked again for the ports of every attempt still waiting on it.
  void ResendPortAsks(const std::string& node) { port_waits_.Resend(node); }
  // Fails `job`'s attempt when it is still Starting past the start timeout, naming the nodes that
  // never answered (ports) or never reported a started rank; those ranks are given up (Lost).
  // When none of those nodes is known to have received its plan (PlanDelivery::Reached), the
  // failure is the infrastructure's (FailureKind::kInfrastructure).
  void EnforceStartTimeout(JobEntry& job, int64_t now_ms);
  // Sends the plan of `job`'s live attempt again to each node that misses it
  // (PlanDelivery::Missing): the plan as sent when this coordinator sent it, else rendered again
  // (its ports asked for again first when its runtime needs ports). Waits, sending nothing, while
  // a node of the placement is not registered (the plans name every node's address).
  void ResendLostPlans(JobEntry& job, int64_t now_ms);
  // Stops `job`'s current attempt: StopWorkers (logged with `reason`, with `warning` first when it
  // has a signal) to every node with a rank that has not ended, and the end of its port wait, if
  // any (see EndPortWait), and of its workers held for their dependencies (StepRelease::EndHeld).
  void Stop(JobEntry& job, const std::string& reason, const StopWarning& warning = {});
  // Sends `warning`'s signal to every rank of `job`'s current attempt that has not ended and stops
  // nothing (the warning before an active deadline; the caller keeps it to once per attempt,
  // JobStatus.deadline_warned_attempt): false, sending nothing, when it has no signal or no rank
  // runs.
  bool Warn(JobEntry& job, const StopWarning& warning, const std::string& reason);
  // Sends the workers of `job`'s attempt that wait for other replicated jobs (held out of its
  // plans on more than one node, step_release.h) once its status shows their dependencies met on
  // every node. Call after each of its worker events.
  void ReleaseSteps(JobEntry& job);
  // `node` registered: the released workers of `job` it has not started are sent again.
  void ResendReleases(JobEntry& job, const std::string& node);
  // A coordinator that restarted, or a new leader, holds none of the workers held for their
  // dependencies (step_release.h). For `job`'s Starting attempt on more than one node with a
  // Pending worker that StepRelease does not know: once every node of the placement has
  // registered and beat PlanDelivery::kAckWaitMs after (the worker events it resent at its
  // registration are applied by then), the attempt's plans are made again as Replan makes them
  // (with ports, asking every node for those it holds first), the waiting workers still Pending
  // are held (StepRelease::Rebuild), and those whose dependencies are met go out (ReleaseSteps).
  // Nothing else is sent. Call on every pass, like ResendLostPlans; a no-op once done.
  void RebuildHeld(JobEntry& job, int64_t now_ms);
  // The job is gone: nothing waits for its ports any more.
  void Forget(const std::string& job) {
    releases_.Forget(job);
    port_waits_.Forget(job);
    delivery_.Forget(job);
    resend_to_.erase(job);
    rebuilding_.erase(job);
  }

 private:
  // Writes the placed attempt into the job's status (placement, the layout's ranks and the
  // steps' Pending, the attempt record), gives ExecAuthority its launcher secret and moves the
  // job to Starting.
  void RecordAttempt(JobEntry& job, const PlanRequest& request,
                     const std::vector<std::string>& nodes, const AttemptLayout& layout,
                     const AttemptSteps& steps, const LauncherSecret& secret, int64_t now_ms);
  // Every node answered: when their work dirs hold different checkpoints (work_dir_agreement.h),
  // fails the job, with no restart, before any rank starts, and returns true.
  bool FailIfWorkDirsDiverge(JobEntry& job, int64_t now_ms);
  // Every node holds its ports: renders the plans with them and sends them (only to the nodes
  // of resend_to_, for a plan rendered again).
  void LaunchWithPorts(JobEntry& job, int64_t now_ms);
  // Sends `plan` to `node` and keeps it for a resend.
  void SendPlan(const std::string& node, v1::LaunchPlan plan, int64_t now_ms);
  // ResendLostPlans for an attempt whose plans this coordinator never sent (it restarted since):
  // its request and layout made again from the stored attempt, for the nodes in `lost`.
  void Replan(JobEntry& job, const std::vector<std::string>& lost, int64_t now_ms);
  // The request Place made for `job`'s current attempt, made again from the stored attempt: the
  // same nodes in the same order, the same restart env. nullopt while a node of the placement is
  // not registered (its address is in every plan).
  std::optional<PlanRequest> StoredRequest(const JobEntry& job) const;
  // The launcher secret to render plans made again with, when `layout` names an exec launcher
  // (the secret is never stored): a new key pair, stored, when this coordinator has none and
  // `launcher_goes(node index)` says the launcher's plan goes out again; else the stored key.
  // nullopt when keys could not be made: the attempt failed (for the infrastructure).
  std::optional<LauncherSecret> SecretToRenderAgain(
      JobEntry& job, PlanRequest& req, const AttemptLayout& layout,
      const std::function<bool(size_t node)>& launcher_goes, int64_t now_ms);
  // RenderAttempt with the runtime's steps and the job's uid, for plans made again; nullopt when
  // they cannot be made: the attempt failed (for the infrastructure; the cause names `what`).
  std::optional<std::vector<v1::LaunchPlan>> RenderAgain(JobEntry& job, const PlanRequest& req,
                                                         const AttemptLayout& layout,
                                                         const LauncherSecret& secret,
                                                         const std::string& what, int64_t now_ms);
  // Hands plans made again (by Replan, or LaunchWithPorts after it) to StepRelease: held as
  // Hold holds them when it knows the attempt; else only stripped, since RebuildHeld holds
  // their waiting workers once the nodes settled.
  void HoldAgain(const std::string& job, uint32_t attempt, const std::vector<std::string>& nodes,
                 std::vector<v1::LaunchPlan>& plans);
  // RebuildHeld, once its plans are made: held again, and released when met.
  void HoldRebuilt(JobEntry& job, std::vector<v1::LaunchPlan> plans);
  // The attempt stopped while reserving ports: no plan went out, so its ranks never existed and
  // end here (Stopped) rather than wait for events that will never come.
  void EndPortWait(JobEntry& job);

  // Constant after construction.
  const NodeRegistry* registry_;
  ExecAuthority* exec_;
  AgentCommands* agents_;
  Owner* owner_;
  Options options_;
  // Owned by the loop.
  PortReservationWaits port_waits_;  // asks exec_ which attempts are active
  PlanDelivery delivery_;            // the plans sent, for a resend
  // The workers held out of the plans until their dependencies are met on every node.
  StepRelease releases_;
  // Jobs whose plans, rendered again, wait for their ports: the only nodes to send them to.
  std::map<std::string, std::vector<std::string>> resend_to_;
  // Jobs whose plans, rendered again by RebuildHeld, wait for their ports: sent to no node.
  std::set<std::string> rebuilding_;
};

}  // namespace trainlet::coordinator
