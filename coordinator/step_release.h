// StepRelease: JobSet's dependsOn across the nodes of an attempt. A replicated job that depends
// on another waits until that one is Ready (every worker of it, on every node, has started) or
// Complete (every one has exited 0), not only the workers on its own node.
//
// On one node, trainlet-step's gate (agent/step/step_gate.h) sees every worker of the attempt and
// holds the dependent ones itself; nothing here acts. On more than one node, the coordinator is
// the one that sees them all: the workers of a replicated job that waits (LaunchPlan.steps) are
// taken out of the plans before they are sent (Hold) and kept here; once the job's status shows
// their dependencies met on every node (Release, after each worker event), they go to their
// nodes in a plan of their own, the attempt's plan with only them as workers. An agent takes such
// a plan as one that adds ranks to the attempt (agent/node_attempt.h), and their own step's gate
// finds nothing left to wait for. A node whose initializer finished first thus waits, its `node`
// ranks Pending, for the others. A release that a disconnected node missed goes again when it
// registers (Unstarted).
//
// Not stored: what is held is made again from the store. A coordinator that restarted (kill -9,
// or a new leader taking over an etcd store) loads the attempt's status, whose held workers are
// Pending, and once every node of the placement has registered and settled (its resent worker
// events applied), AttemptLauncher renders the attempt's plans again as Replan does and Rebuild
// holds the waiting workers still Pending; those past Pending were released before the restart
// and reached their node, and are never sent again. Release then sends the rest once, when
// their dependencies are met (at once when they were met already). An agent that already runs
// a resent worker takes the copy as a no-op (agent/node_attempt.h), and one that ran and ended
// is past Pending by then (its events came first), so a release the old coordinator sent just
// before it died does not start anything twice.
//
// Owned by AttemptLauncher, on the coordinator's loop; no locks.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "trainlet/v1/launch.pb.h"
#include "trainlet/v1/operator.pb.h"

namespace trainlet::coordinator {

// Whether `need` is met in `status`: every worker of replicated job need.step() ("" the main
// one) on every node has started (Ready: Running or Succeeded) or exited 0 (Complete:
// Succeeded). A replicated job with no worker in the attempt meets both.
bool DependencyMetEverywhere(const v1::JobStatus& status, const v1::StepDependency& need);

class StepRelease {
 public:
  // Takes out of `plans` (one per node of the attempt, `nodes` in the same order) the workers of
  // every replicated job that waits (LaunchPlan.steps), when the attempt has more than one node,
  // and keeps them for Release. An attempt already held keeps what it holds (a plan rendered
  // again for a node that missed it is stripped the same way). A no-op for one node.
  void Hold(const std::string& job, uint32_t attempt, const std::vector<std::string>& nodes,
            std::vector<v1::LaunchPlan>& plans);
  // The held workers of `status`'s current attempt whose dependencies are now met everywhere,
  // as (node, plan) pairs to send, each replicated job once.
  std::vector<std::pair<std::string, v1::LaunchPlan>> Release(const v1::JobStatus& status);
  // The released plans of `status`'s current attempt for `node` that hold a worker still
  // Pending in `status`: to send again when the node registers (an agent takes a copy of a plan
  // whose ranks it runs as a no-op).
  std::vector<v1::LaunchPlan> Unstarted(const v1::JobStatus& status, const std::string& node) const;
  // True while some workers of `job`'s `attempt` are held here.
  bool Holding(const std::string& job, uint32_t attempt) const;
  // True once Hold or Rebuild took `job`'s `attempt` on more than one node (its workers that wait
  // are known here, held or released), until the attempt ends (EndHeld) or the job goes.
  bool Knows(const std::string& job, uint32_t attempt) const;
  // What a restarted coordinator held of `status`'s current attempt, rebuilt from its plans
  // rendered again (`plans`, one per node of `nodes`, as for Hold; they are not sent): the
  // waiting workers `status` shows Pending are held, those past Pending are dropped (they were
  // released before the restart), and a replicated job left with none counts as released. Call
  // only once `status` holds every event the nodes had to resend: a worker that ran and ended
  // while its events were unacknowledged looks Pending before. A no-op for an attempt known here.
  void Rebuild(const v1::JobStatus& status, const std::vector<std::string>& nodes,
               std::vector<v1::LaunchPlan> plans);
  // Takes the waiting workers out of `plans` as Hold does, keeping nothing: for a plan rendered
  // again for a node that missed it before Rebuild ran, whose waiting workers Rebuild holds.
  static void Strip(const std::vector<std::string>& nodes, std::vector<v1::LaunchPlan>& plans);
  // `status`'s current attempt stops: its workers still held never start, and end here
  // (Stopped, with a message saying so), since no agent holds them to report it. Nothing of the
  // attempt is released afterwards. True when a rank changed.
  bool EndHeld(v1::JobStatus& status);
  // The job is gone.
  void Forget(const std::string& job) { jobs_.erase(job); }

 private:
  struct Waiting {
    std::vector<v1::StepDependency> needs;
    std::map<std::string, v1::LaunchPlan> plans;  // by node: the attempt's plan, only its workers
    bool released = false;
  };
  struct Job {
    uint32_t attempt = 0;
    std::map<std::string, Waiting> steps;  // by replicated job ("" the main one)
  };
  std::map<std::string, Job> jobs_;
};

}  // namespace trainlet::coordinator
