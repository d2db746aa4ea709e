// PassCapacity: the free room of every node during one scheduling pass, and the gang planner
// called against it.
//
// JobController::Schedule builds one per pass from the registry and what placed jobs hold
// (NodeUsage), and places every waiting job through it. Two things make a pass with thousands of
// waiting jobs cheap (bench/scheduler: 10,000 pending jobs over 1,000 nodes):
//  - the node snapshot (names, labels, taints, allocatable) is built once per pass, not once per
//    job, and a placement charges its nodes in place;
//  - room only shrinks during a pass (nothing ends inside it), so a gang request that did not fit
//    cannot fit later in the same pass: its answer is remembered by the request's shape, and
//    every later job of the same shape is answered without running the planner;
//  - the room has a fingerprint (Fingerprint), kept current as placements charge it. The planner
//    is deterministic, so a job that found no room at fingerprint F finds none again while the
//    room's fingerprint is F: JobController skips it until something changes (a rank ends, a
//    node comes, goes, is cordoned or changes its labels).
//
// Owned by the caller for the duration of one pass, on the coordinator's loop; no locks.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "coordinator/gang_planner.h"
#include "coordinator/node_registry.h"
#include "coordinator/resources.h"

namespace trainlet::coordinator {

class PassCapacity {
 public:
  // Every registered node, less `used_slots` and `used_resources` (by node name).
  PassCapacity(const NodeRegistry& registry, const std::map<std::string, uint32_t>& used_slots,
               const std::map<std::string, Resources>& used_resources);

  // PlaceGang over the current room; the same error (kUnavailable, counting the nodes through
  // each filter) for a shape that already failed in this pass. Charges nothing.
  Result<Placement> Place(const GangRequest& request);
  // `slots` and `resources` of each node of `nodes` are taken (the job placed there).
  void Charge(const std::vector<std::string>& nodes, uint32_t slots, const Resources& resources);

  // A hash of everything the planner reads of every node (name, free slots and resources,
  // allocatable, ready, schedulable, healthy, labels, taints): equal fingerprints, equal room,
  // up to a 64-bit collision. Never 0, so 0 can mean "none".
  uint64_t Fingerprint() const { return fingerprint_ == 0 ? 1 : fingerprint_; }
  // The free slots of `node` now (0 for a node the snapshot lacks).
  uint32_t FreeSlots(const std::string& node) const;
  // How many Place calls ran the planner, and how many were answered from a failed shape.
  uint64_t planned() const { return planned_; }
  uint64_t remembered() const { return remembered_; }

 private:
  std::vector<NodeCapacity> nodes_;
  std::unordered_map<std::string, size_t> index_;   // node name -> position in nodes_
  std::unordered_map<std::string, Status> failed_;  // ShapeKey -> why it did not fit
  uint64_t fingerprint_ = 0;  // sum of NodeHash over nodes_, so a charge updates it in O(1)
  uint64_t planned_ = 0;
  uint64_t remembered_ = 0;
};

// Everything of one node the planner reads, hashed.
uint64_t NodeHash(const NodeCapacity& node);

// Everything of a GangRequest the planner reads, as one string: equal keys, equal answers.
std::string ShapeKey(const GangRequest& request);

}  // namespace trainlet::coordinator
