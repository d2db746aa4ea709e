// NodeAttempt: one attempt of one job on this node, and everything the node holds for it: its
// ports (PortReservations), its rendezvous attempt (RendezvousServer), its step (WorkerSupervisor)
// and its stop grace. NodeAttempts: the node's table of them, which turns the coordinator's
// messages (ReservePorts, LaunchPlan, StopWorkers) and the ranks' exits into moves of one or
// more attempts.
//
// An attempt's life is one table of (state, trigger) -> state, kAttemptTransitions, below. The
// rule for the services: a trigger that starts something (ports reserved, plan arrived) acts only
// when the table allows the move, and is refused otherwise. A trigger that ends something (stop
// asked, replaced, ranks ended) always asks the services to end the attempt's ports, rendezvous
// and ranks, whatever the state: those calls are idempotent, and the services may hold things the
// table never saw (ports a previous agent promised, an exec session's step). Only the state move
// is refused then.
//
// Threading: owned by the agent's loop, like the services; no locks. The services are not owned
// and must outlive the table.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "agent/port_reservations.h"
#include "agent/rendezvous_server.h"
#include "agent/worker_supervisor.h"
#include "common/status.h"
#include "trainlet/v1/envelope.pb.h"

namespace trainlet::agent {

enum class AttemptState {
  kNew,        // just made; every attempt leaves it at once by the trigger that made it
  kPortsHeld,  // ports held for the attempt's ranks; its plan has not come
  kLaunching,  // the plan came: its files and ports are handed over, the step is being started
  kRunning,    // ranks were handed to a step (each one's start is reported on its own)
  kStopping,   // asked to stop or replaced: its ranks are being stopped
  kEnded,      // nothing of it runs here; only the latest attempt of a job stays in the table
};

enum class AttemptTrigger {
  kPortsReserved,  // the coordinator's ReservePorts (again, for a resent request)
  kPlanArrived,    // the attempt's LaunchPlan (again, for a plan that adds ranks)
  kLaunched,       // the plan's ranks went to the step, started or failed
  kAdopted,        // a previous agent's step of the attempt was adopted at start-up
  kStopAsked,      // StopWorkers, or the coordinator went silent (partition)
  kReplaced,       // a plan of a newer attempt of the job arrived
  kRanksEnded,     // nothing of the job runs here any more
};

struct AttemptTransition {
  AttemptState from;
  AttemptTrigger trigger;
  AttemptState to;
};

// The whole life of an attempt on a node. A (from, trigger) pair that is not listed is
// forbidden. kEnded appears in no `from` column. An attempt number that comes again once its
// attempt stops or has ended belongs to a new attempt (a job deleted and created again under the
// same name counts from 1 again): NodeAttempts makes a new NodeAttempt for it.
// clang-format off
inline constexpr std::array kAttemptTransitions = {
    //                from                     trigger                         to
    AttemptTransition{AttemptState::kNew,       AttemptTrigger::kPortsReserved, AttemptState::kPortsHeld},
    AttemptTransition{AttemptState::kPortsHeld, AttemptTrigger::kPortsReserved, AttemptState::kPortsHeld},
    AttemptTransition{AttemptState::kRunning,   AttemptTrigger::kPortsReserved, AttemptState::kRunning},
    AttemptTransition{AttemptState::kNew,       AttemptTrigger::kPlanArrived,   AttemptState::kLaunching},
    AttemptTransition{AttemptState::kPortsHeld, AttemptTrigger::kPlanArrived,   AttemptState::kLaunching},
    AttemptTransition{AttemptState::kRunning,   AttemptTrigger::kPlanArrived,   AttemptState::kLaunching},
    AttemptTransition{AttemptState::kLaunching, AttemptTrigger::kLaunched,      AttemptState::kRunning},
    AttemptTransition{AttemptState::kNew,       AttemptTrigger::kAdopted,       AttemptState::kRunning},
    AttemptTransition{AttemptState::kPortsHeld, AttemptTrigger::kStopAsked,     AttemptState::kEnded},
    AttemptTransition{AttemptState::kRunning,   AttemptTrigger::kStopAsked,     AttemptState::kStopping},
    AttemptTransition{AttemptState::kStopping,  AttemptTrigger::kStopAsked,     AttemptState::kStopping},
    AttemptTransition{AttemptState::kPortsHeld, AttemptTrigger::kReplaced,      AttemptState::kEnded},
    AttemptTransition{AttemptState::kRunning,   AttemptTrigger::kReplaced,      AttemptState::kStopping},
    AttemptTransition{AttemptState::kStopping,  AttemptTrigger::kReplaced,      AttemptState::kStopping},
    AttemptTransition{AttemptState::kRunning,   AttemptTrigger::kRanksEnded,    AttemptState::kEnded},
    AttemptTransition{AttemptState::kStopping,  AttemptTrigger::kRanksEnded,    AttemptState::kEnded},
};
// clang-format on

// The state `trigger` leads to from `from`, or nullopt when the table forbids it.
std::optional<AttemptState> NextState(AttemptState from, AttemptTrigger trigger);
const char* AttemptStateName(AttemptState state);        // "PortsHeld", ...
const char* AttemptTriggerName(AttemptTrigger trigger);  // "PlanArrived", ...

// The node's services an attempt acts through. Not owned.
struct AttemptServices {
  PortReservations* ports = nullptr;
  RendezvousServer* rendezvous = nullptr;
  WorkerSupervisor* supervisor = nullptr;
};

class NodeAttempt {
 public:
  using Clock = std::chrono::steady_clock;

  NodeAttempt(std::string job, uint32_t attempt, AttemptServices services);

  const std::string& job() const { return job_; }
  uint32_t attempt() const { return attempt_; }
  AttemptState state() const { return state_; }
  // SIGTERM..SIGKILL delay of its plan (or adopted step); kDefaultStopGrace until one says.
  std::chrono::milliseconds stop_grace() const { return stop_grace_; }
  // Its plan arrived (or its step was adopted): false while it holds only ports. What the node
  // reports of it (HeldAttempt.plan_received).
  bool plan_received() const { return plan_received_; }
  // True once `rank` of it went to a step here (started or failed to start), or was adopted.
  bool Launched(uint32_t rank) const { return launched_.contains(rank); }

  // Moves the state along the table; false, leaving it, when the table forbids the move. The
  // methods below call it; it is public for the table's tests and for NodeAttempts.
  bool Apply(AttemptTrigger trigger);

  // kPortsReserved: holds `count` ports (the same ones when asked again). Errors: Invalid when
  // the table refuses (the attempt is past its plan), or PortReservations::Reserve's.
  Result<std::vector<uint32_t>> ReservePorts(uint32_t count, Clock::time_point now);
  // kAdopted: a previous agent's step runs its ranks (`ranks`, when known); `stop_grace` is the
  // step's (0: default).
  bool Adopt(std::chrono::milliseconds stop_grace, const std::vector<uint32_t>& ranks = {});
  // kPlanArrived: false, doing nothing, when refused. Else records the plan's stop grace (0:
  // default); the caller then writes its files, hands over the ports and starts the ranks.
  bool PlanArrived(std::chrono::milliseconds stop_grace);
  // The attempt's ports go to its ranks (PortReservations::HandOver: its error fails them all).
  Status HandOverPorts();
  // Registers the ranks of the plan with the rendezvous server; the env they get from it.
  // `user`: they run as that user (TrainingUser), who gets an endpoint of its own.
  std::map<std::string, std::string> JoinRendezvous(const std::vector<uint32_t>& ranks,
                                                    std::optional<RendezvousUser> user = {});
  // kLaunched: starts `launches` under a step with this attempt's stop grace, one result per
  // launch; or, when `blocked` is an error (the plan's files or ports), starts none and fails
  // each with kIo and its message. Taken by value: the launches move into the step.
  std::vector<Result<pid_t>> Launch(std::vector<WorkerLaunch> launches, const Status& blocked);

  // kStopAsked: gives back its ports, aborts its rendezvous and stops its ranks with `grace`,
  // after `warning` (WorkerSupervisor::Stop) when it has a signal.
  void Stop(const std::string& reason, std::chrono::milliseconds grace, Clock::time_point now,
            const StopWarning& warning = {});
  // kStopAsked for its ranks only (the coordinator is silent): ports and rendezvous stay.
  void StopRanks(std::chrono::milliseconds grace, Clock::time_point now);
  // kReplaced by `newer`: its ranks are SIGKILLed, its rendezvous aborted, its ports given back.
  void Replace(uint32_t newer, Clock::time_point now);
  // kRanksEnded: its ports are given back and its rendezvous forgotten.
  void RanksEnded();

 private:
  friend class NodeAttempts;  // Attach gives the services to attempts adopted before them

  std::string job_;
  uint32_t attempt_;
  AttemptServices services_;
  AttemptState state_ = AttemptState::kNew;
  std::chrono::milliseconds stop_grace_ = kDefaultStopGrace;
  bool plan_received_ = false;
  std::set<uint32_t> launched_;  // ranks handed to a step, or adopted
};

class NodeAttempts {
 public:
  using Clock = std::chrono::steady_clock;

  NodeAttempts() = default;
  explicit NodeAttempts(AttemptServices services) : services_(services) {}
  // The services, for a table made before them (the agent adopts its steps before its rendezvous
  // server exists). Adopt, and the accessors below, need none; every other method needs them.
  // Attempts adopted before it are given the services too.
  void Attach(AttemptServices services);

  // At most this many ports per attempt: more is a bad request, not a scan to run.
  static constexpr uint32_t kMaxPortsPerAttempt = 1024;

  // The answer to a ReservePorts: its ports, or why not (an attempt older than this node's
  // latest of the job, too many ports, refused by the table, the range is full, or the ranks of
  // a deleted incarnation of the job still stopping here: Incarnation).
  v1::PortsReserved ReservePorts(const v1::ReservePorts& request, Clock::time_point now);

  // A plan arrived. Returns the attempt to launch it, now kLaunching, after replacing the job's
  // latest attempt here, if older (its ranks must not run beside the new), and older attempts
  // that hold only ports. Null, with `why`, when
  // the plan is to be ignored (an older attempt than the latest, a copy of the plan of an
  // attempt running here: every rank of it was launched already, the coordinator resent a plan
  // it did not know arrived, or the ranks of a deleted incarnation of the job still stopping
  // here: Incarnation; the coordinator sends the plan again) or the attempt is refused by
  // the table (it is being launched); `refused` tells the second case. A plan for an attempt
  // that stops or has ended here starts a new attempt of that number (see the table).
  NodeAttempt* BeginPlan(const v1::LaunchPlan& plan, Clock::time_point now, std::string* why,
                         bool* refused);

  // PurgeJob: the coordinator deleted `job`'s incarnation `uid` ("" from a coordinator before
  // UIDs). The job leaves the table once nothing of it is held here (every attempt Ended): now,
  // or when its last attempt ends. So the name can come back counting from attempt 1, and the
  // table, the registration and every tick's walk of it do not grow with each job the node ever
  // ran. A purge of another incarnation than the one the table holds is ignored.
  void Purge(const std::string& job, const std::string& uid);

  // StopWorkers: the attempt (0: every attempt of the job) stops, with the job's stop grace,
  // after `warning` when it has a signal.
  void Stop(const std::string& job, uint32_t attempt, const std::string& reason,
            Clock::time_point now, const StopWarning& warning = {});
  // StopWorkers with warn_only: the ranks of the attempt (0: every attempt) get `signal` and
  // nothing else changes (no state move: the attempt runs on).
  void Warn(const std::string& job, uint32_t attempt, int signal);
  // The coordinator is silent: the ranks of every attempt of `job` stop, with its stop grace less
  // `late` (how far past the partition grace this comes), so their SIGKILL lands where the
  // coordinator's restart hold expects it however long the agent's loop was held.
  void StopRanks(const std::string& job, Clock::time_point now,
                 std::chrono::milliseconds late = std::chrono::milliseconds(0));
  // Nothing of `job` runs here any more: (job, attempt) gives back its ports and rendezvous.
  void RanksEnded(const std::string& job, uint32_t attempt);
  // A previous agent's step of (job, attempt) was adopted; `stop_grace_ms` is its (0: default);
  // `ranks` are every rank of the step. With a `rendezvous` token (AdoptedRendezvousOf), the
  // rendezvous server serves its ranks again, on their user's endpoint
  // (RendezvousServer::RestoreAttempt), now or once Attach gives it: an MPI job started directly
  // keeps its PMIx fences across an agent restart.
  void Adopt(const std::string& job, uint32_t attempt, uint32_t stop_grace_ms,
             const std::vector<uint32_t>& ranks = {}, const AdoptedRendezvous& rendezvous = {});

  // The attempts held (HeldAttempt), by job and number: for the registration every one, ended or
  // not (a restarted coordinator must not resend the plan of an attempt whose exits it has yet
  // to hear); for a heartbeat (`with_ended` false) only those not Ended, so that a beat does not
  // grow with every job the node ever ran (the table keeps each job's latest attempt).
  std::vector<v1::HeldAttempt> Report(bool with_ended = true) const;

  // The newest attempt of `job` a plan (or an adopted step) brought here; 0 when none.
  uint32_t latest(const std::string& job) const;
  // The stop grace of the job's latest attempt; kDefaultStopGrace when there is none.
  std::chrono::milliseconds StopGrace(const std::string& job) const;
  // Every job a plan or an adopted step brought here, its attempts ended or not.
  std::vector<std::string> jobs() const;
  // Calls `fn(job, attempt)` with each job's latest attempt, in job order; nothing is copied.
  template <typename Fn>
  void ForEachLatest(Fn&& fn) const {
    for (const auto& [name, job] : jobs_) {
      if (const auto it = job.attempts.find(job.latest); it != job.attempts.end()) {
        fn(name, it->second);
      }
    }
  }
  // Null when the table does not hold (job, attempt).
  const NodeAttempt* Find(const std::string& job, uint32_t attempt) const;
  size_t size() const;  // attempts held

 private:
  struct Job {
    uint32_t latest = 0;
    std::map<uint32_t, NodeAttempt> attempts;
    // The incarnation (LaunchPlan.job_uid, ReservePorts.job_uid) of the last trigger that
    // started something; "" when none said.
    std::string uid;
    bool purged = false;  // deleted (Purge): leaves the table once every attempt has ended
  };
  using JobMap = std::map<std::string, Job>;
  // The entry for a trigger of `name`'s incarnation `uid` that starts something. An entry of
  // another incarnation (UIDs that differ, or one purged: the job was deleted and created again,
  // and this node may have missed the purge) is replaced by an empty one when nothing of it is
  // held here; while something is, its attempts are stopped and null is returned, with `why`.
  Job* Incarnation(const std::string& name, const std::string& uid, Clock::time_point now,
                   std::string* why);
  NodeAttempt& Get(Job& job, const std::string& name, uint32_t attempt);
  // Get, for a trigger that starts something: an attempt that stops or has ended is made anew.
  NodeAttempt& GetToStart(Job& job, const std::string& name, uint32_t attempt);
  // Ended attempts other than the latest are forgotten: the latest keeps the job's stop grace.
  void Forget(Job& job);
  // Forget, and the whole entry goes when its job was purged and every attempt has ended.
  void Forget(JobMap::iterator it);
  void RestoreRendezvous(const std::string& job, uint32_t attempt,
                         const AdoptedRendezvous& rendezvous);

  AttemptServices services_;
  JobMap jobs_;
  // Adopted before Attach, every step of an attempt merged: restored by Attach.
  std::map<std::pair<std::string, uint32_t>, AdoptedRendezvous> to_restore_;
};

}  // namespace trainlet::agent
