// What the gang planner is given, built from a job's documents and from the node registry:
// what a job asks of each node (GangRequestOf) and what each registered node has left
// (NodeCapacities). JobController keeps the counts of what its placed jobs hold and passes them
// in; these functions own no state.
//
// Pure functions over their arguments; called on the coordinator's loop (the registry is the
// loop's).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/trainjob/trainjob_model.h"
#include "coordinator/gang_planner.h"
#include "coordinator/node_registry.h"
#include "coordinator/resources.h"

namespace trainlet::coordinator {

// Resources, nodeSelector and tolerations of a job: its trainer.resourcesPerNode; its
// runtimePatches' nodeSelector over the runtime's (the job's keys win); the runtime's
// tolerations, then the job's. Sizes (num_nodes, slots_per_node) are left 0 for the caller.
// Invalid, naming the field, for a quantity that does not parse; a resource the planner does not
// track adds a note for the job to `warnings`.
Result<GangRequest> GangRequestOf(const trainjob::TrainJob& spec,
                                  const trainjob::TrainingRuntime& runtime,
                                  std::vector<std::string>& warnings);

// Every registered node as the planner sees it: `used_slots` and `used_resources` (by node
// name) are what placed jobs hold there.
std::vector<NodeCapacity> NodeCapacities(const NodeRegistry& registry,
                                         const std::map<std::string, uint32_t>& used_slots,
                                         const std::map<std::string, Resources>& used_resources);

}  // namespace trainlet::coordinator
