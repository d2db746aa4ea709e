// ClusterIdentity: the identity of a trainlet cluster, kept in the coordinator's store (issue 19,
// defect 3).
//
// A coordinator whose store was lost (trainlet.db truncated to 0 bytes or deleted, an etcd prefix
// wiped) used to start empty and tell every agent to stop the ranks of the attempts it did not
// know: the whole cluster's work died. Now the store holds a random cluster id, made by an
// explicit init (`trainlet-coordinator --init-store`), and:
//   - a coordinator refuses to start on a store that holds nothing at all (no id, no job, no
//     runtime, no queue object, no cordon) unless told to initialise it; its message says how,
//     and what a new identity means for the agents;
//   - a store written before identities, which holds records, adopts a new id at its first start
//     (it is clearly not empty);
//   - every RegisterAck carries the id; an agent keeps the first id it registered with and never
//     stops ranks for, or registers with, a coordinator of another (agent/cluster_binding.h).
//
// Pure apart from the store it is given; called once at start, on the caller's thread.
#pragma once

#include <functional>
#include <string>

#include "common/status.h"
#include "coordinator/job_store.h"

namespace trainlet::coordinator {

// A new cluster id: 32 lowercase hex digits from the system's random source.
std::string NewClusterId();

// The cluster id of `store`, as the coordinator starts on it: the stored one; else, for a store
// that holds records, a new one, stored (adopted); else, with `init`, a new one, stored; else
// Invalid, naming the store, saying how to initialise it and warning that
// agents of the old cluster refuse a new identity. `make_id` makes new ids (NewClusterId unless
// a test says). Store errors are returned as they come.
Result<std::string> EstablishClusterId(JobStore& store, bool init,
                                       const std::function<std::string()>& make_id = NewClusterId);

}  // namespace trainlet::coordinator
