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
#include "common/trainjob/trainjob_model.h"
#include "coordinator/resources.h"

namespace trainlet::coordinator {

// A node taint, as Kubernetes has them: effect is NoSchedule, PreferNoSchedule or NoExecute.
struct NodeTaint {
  std::string key, value, effect;
};

struct NodeCapacity {
  std::string name;
  uint32_t total_slots = 0;
  uint32_t free_slots = 0;
  bool ready = false;        // registered and heartbeating (not Suspect or Lost)
  bool schedulable = false;  // false when cordoned or draining
  std::map<std::string, std::string> labels;
  bool healthy = true;       // its health checks pass
  Resources free_resources;  // allocatable minus what placed jobs ask for
  Resources allocatable;     // the whole node; packing keeps nodes with unasked GPUs free
  std::vector<NodeTaint> taints;
};

// "gpu=a100,zone=x": a nodeSelector or a flavor's nodeLabels as messages and events show them.
std::string FormatSelector(const std::map<std::string, std::string>& selector);

// The ResourceFlavors a job was admitted to (Kueue injects their nodeLabels into the pod
// template's nodeSelector and their tolerations into its tolerations): the gang goes only to nodes
// that carry every one of `node_labels`, on top of the job's own nodeSelector, and a node's taint
// is tolerated by `tolerations` as well as by the job's. Empty when the job went through no queue
// (or asked for no resource a flavor covers). Kept apart from the job's own so the unplaceable
// message names the flavor (flavor_constraint.h builds it from the job's admission).
struct FlavorConstraint {
  std::string flavors;  // "a100", or "a100, cpu-pool" when resources came from two flavors
  std::map<std::string, std::string> node_labels;
  std::vector<trainjob::Toleration> tolerations;
  bool empty() const { return flavors.empty(); }
};

struct GangRequest {
  uint32_t num_nodes = 0;       // >= 1
  uint32_t slots_per_node = 0;  // >= 1
  Resources resources;          // per node; a zero amount asks for nothing of that resource
  std::map<std::string, std::string> node_selector;  // every pair must be a label of the node
  std::vector<trainjob::Toleration> tolerations;
  FlavorConstraint flavor;  // set by the caller for the attempt it places, not by GangRequestOf
};

struct Placement {
  std::vector<std::string> nodes;  // node-rank order: nodes[i] runs node rank i
};

// Topology labels, widest first. A gang that fits inside one zone is kept there; inside that
// zone, one rack is preferred when a rack can hold it.
inline constexpr std::string_view kZoneLabel = "topology.kubernetes.io/zone";
inline constexpr std::string_view kRackLabel = "trainlet.io/rack";

// Places all num_nodes nodes or none. A node is a candidate when it is ready, schedulable,
// healthy, matches node_selector and the flavor's node_labels, tolerates (with the job's or the
// flavor's tolerations) each of its NoSchedule and NoExecute taints, has
// free_slots >= slots_per_node and free_resources covering `resources`. Then:
//  1. Locality: for each topology label in turn (zone, then rack), when some group of candidates
//     sharing a value can hold the whole gang, the candidates narrow to the best such group:
//     the one whose best-fit choice leaves the fewest free slots, ties broken by label value.
//     Nodes without the label are left out of that narrowing step only when a group fits.
//  2. Packing: among the remaining candidates, best fit: first the nodes with the fewest GPUs the
//     job does not ask for (a CPU job keeps off GPU nodes), then the fewest free GPUs of the kinds
//     asked for, then the fewest free slots, so nodes with the most room stay whole for bigger
//     jobs; ties broken by name.
//  3. Node ranks follow the chosen nodes' names in natural order ("n2" before "n10"), so rank 0
//     (the rendezvous master for most runtimes) is predictable.
// Deterministic: the same input in any order gives the same placement. O(n log n) in the number
// of nodes.
// Errors: kInvalid when num_nodes or slots_per_node is 0; kUnavailable when the gang does not
// fit now, with a message that counts the nodes through each filter in turn, e.g.
// "needs 4 nodes with 2 free slots each; 3 of 3 nodes are Ready and schedulable, 3 of them have
// 2 free slots", or "needs 2 nodes with 1 free slot, nvidia.com/gpu: 8 each; 4 of 4 nodes are
// Ready and schedulable, 3 of them match nodeSelector node-type=training, 3 of them have 1 free
// slot, 1 of them has nvidia.com/gpu: 8 free". With a flavor, its stage reads "1 of them matches
// ResourceFlavor a100's nodeLabels gpu=a100", and when no usable node carries those labels the
// message ends saying so.
Result<Placement> PlaceGang(const GangRequest& request, const std::vector<NodeCapacity>& nodes);

// nodeSelector: every key of `selector` is a label of the node with that value. The node's name
// also answers for kubernetes.io/hostname when it has no such label.
bool MatchesSelector(const std::map<std::string, std::string>& selector,
                     const std::map<std::string, std::string>& labels, std::string_view name);
// Kubernetes' rule: an empty effect matches every effect; operator Exists matches any value (and
// with an empty key, every taint); Equal (or "") needs key and value equal.
bool ToleratesTaint(const std::vector<trainjob::Toleration>& tolerations, const NodeTaint& taint);
// Whether every NoSchedule and NoExecute taint is tolerated (PreferNoSchedule never blocks).
bool ToleratesAll(const std::vector<trainjob::Toleration>& tolerations,
                  const std::vector<NodeTaint>& taints);
// "key=value:Effect", or "key:Effect" without a value (kubectl taint's form).
std::string FormatTaint(const NodeTaint& taint);

// "n2" < "n10": digit runs compare as numbers, everything else byte by byte. A strict weak
// order; names differing only in leading zeros fall back to plain comparison.
bool NaturalNameLess(std::string_view a, std::string_view b);

}  // namespace trainlet::coordinator
