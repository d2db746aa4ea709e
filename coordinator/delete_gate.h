// DeleteGate: when a TrainJob being deleted may leave the store (issue 19, "Delete of a job on a
// Lost node").
//
// A delete asks every rank to stop and removes the job once none runs. A rank whose node went
// silent ends Lost in the status, yet the process may still run there (a hung or partitioned
// agent, an agent killed while its step lives on). So, as Kubernetes keeps a pod Terminating
// until its kubelet confirms, a deleting job stays (Terminating in get, describe) until each node
// holding a Lost rank of its current attempt has confirmed that attempt stopped: the node is
// registered and not Lost, and its last report of held attempts (registration or heartbeat,
// node_registry.h) no longer holds the attempt. An agent that does not report attempts (older
// than the report) confirms by registering again, as before. `trainletctl delete --force`
// (Force) removes the job without waiting for any rank: what still runs is stopped when its node
// registers again (NodeReconcile), and until then it may run beside a job re-applied under the
// same name.
//
// Owned by JobController, on the coordinator's loop; no locks. `nodes` outlives it. Memory only:
// a forced delete the store refused is retried by the same coordinator; after a restart the job
// is Terminating again and waits, as if not forced (force it again).
#pragma once

#include <cstdint>
#include <set>
#include <string>

#include "coordinator/node_registry.h"
#include "trainlet/v1/operator.pb.h"

namespace trainlet::coordinator {

class DeleteGate {
 public:
  explicit DeleteGate(const NodeRegistry* nodes) : nodes_(nodes) {}

  // What a deleting job still waits for; `finish` true when it may be removed now.
  struct Decision {
    bool finish = false;
    // Empty, or why not ("rank 0 on node n2 (Lost) has not been confirmed stopped ...").
    std::string waiting_for;
  };
  // For the job named `job` whose status is `status`: it may go when forced, or when every rank
  // has ended and each Lost rank's node confirmed (see above).
  Decision Decide(const std::string& job, const v1::JobStatus& status) const;

  // `trainletctl delete --force` of `job`: no wait for any rank.
  void Force(const std::string& job) { forced_.insert(job); }
  bool Forced(const std::string& job) const { return forced_.contains(job); }
  // The job is gone.
  void Forget(const std::string& job) { forced_.erase(job); }

  // Appends a Warning "DeleteWaitsForNode" event saying `waiting_for` to `status`, unless the
  // last such event says the same. True when it appended one (the status must be stored).
  static bool NoteWaiting(v1::JobStatus& status, const std::string& waiting_for, int64_t now_ms);

 private:
  // True when `node` has confirmed that `job`'s `attempt` no longer runs there.
  bool Confirmed(const std::string& node, const std::string& job, uint32_t attempt) const;

  // Constant after construction.
  const NodeRegistry* nodes_;
  // Owned by the loop: jobs deleted with --force, until they are gone.
  std::set<std::string> forced_;
};

}  // namespace trainlet::coordinator
