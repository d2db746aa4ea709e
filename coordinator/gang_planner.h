// All-or-nothing placement of a job's gang of nodes.
//
// The planner sees a snapshot of node capacity and answers with the nodes for every node rank,
// or with why it cannot. It keeps no state and reserves nothing: the caller charges the slots
// to the chosen nodes before planning the next job. Pure function, safe from any thread.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace trainlet::coordinator {

struct NodeCapacity {
  std::string name;
  uint32_t total_slots = 0;
  uint32_t free_slots = 0;
  bool ready = false;        // registered and heartbeating (not Suspect or Lost)
  bool schedulable = false;  // false when cordoned or draining
  std::map<std::string, std::string> labels;
};

struct GangRequest {
  uint32_t num_nodes = 0;       // >= 1
  uint32_t slots_per_node = 0;  // >= 1
};

struct Placement {
  std::vector<std::string> nodes;  // node-rank order: nodes[i] runs node rank i
};

// Topology labels, widest first. A gang that fits inside one zone is kept there; inside that
// zone, one rack is preferred when a rack can hold it.
inline constexpr std::string_view kZoneLabel = "topology.kubernetes.io/zone";
inline constexpr std::string_view kRackLabel = "trainlet.io/rack";

// Places all num_nodes nodes or none. A node is a candidate when it is ready, schedulable and
// has free_slots >= slots_per_node. Then:
//  1. Locality: for each topology label in turn (zone, then rack), when some group of candidates
//     sharing a value can hold the whole gang, the candidates narrow to the best such group:
//     the one whose best-fit choice leaves the fewest free slots, ties broken by label value.
//     Nodes without the label are left out of that narrowing step only when a group fits.
//  2. Packing: among the remaining candidates, best fit: fewest free slots first, so nodes with
//     the most room stay whole for bigger jobs; ties broken by name.
//  3. Node ranks follow the chosen nodes' names in natural order ("n2" before "n10"), so rank 0
//     (the rendezvous master for most runtimes) is predictable.
// Deterministic: the same input in any order gives the same placement. O(n log n) in the number
// of nodes.
// Errors: kInvalid when num_nodes or slots_per_node is 0; kUnavailable when the gang does not
// fit now, with a message saying what is missing, e.g. "needs 4 nodes with 2 free slots each;
// 3 nodes are Ready and schedulable, 3 of them have 2 free slots".
Result<Placement> PlaceGang(const GangRequest& request, const std::vector<NodeCapacity>& nodes);

// "n2" < "n10": digit runs compare as numbers, everything else byte by byte. A strict weak
// order; names differing only in leading zeros fall back to plain comparison.
bool NaturalNameLess(std::string_view a, std::string_view b);

}  // namespace trainlet::coordinator
