#include "coordinator/placement_inputs.h"

#include <utility>

namespace trainlet::coordinator {

Result<GangRequest> GangRequestOf(const trainjob::TrainJob& spec,
                                  const trainjob::TrainingRuntime& runtime,
                                  std::vector<std::string>& warnings) {
  TRAINLET_ASSIGN_OR_RETURN(ParsedRequests requests,
                            ParseResourceRequests(spec.trainer.resources_per_node));
  for (const auto& note : requests.ignored) {
    warnings.push_back("TrainJob/" + spec.name + ": " + note);
  }
  GangRequest gang;
  gang.resources = requests.resources;
  // The TrainJob's runtimePatches narrow the runtime's pod template: its keys win.
  gang.node_selector = spec.node_selector;
  gang.node_selector.insert(runtime.node_selector.begin(), runtime.node_selector.end());
  gang.tolerations = runtime.tolerations;
  gang.tolerations.insert(gang.tolerations.end(), spec.tolerations.begin(), spec.tolerations.end());
  return gang;
}

std::vector<NodeCapacity> NodeCapacities(const NodeRegistry& registry,
                                         const std::map<std::string, uint32_t>& used_slots,
                                         const std::map<std::string, Resources>& used_resources) {
  std::vector<NodeCapacity> capacity;
  capacity.reserve(registry.nodes().size());
  for (const auto& [name, node] : registry.nodes()) {
    NodeCapacity c;
    c.name = name;
    c.total_slots = node.info.slots();
    auto u = used_slots.find(name);
    const uint32_t slots_used = u == used_slots.end() ? 0 : u->second;
    c.free_slots = c.total_slots > slots_used ? c.total_slots - slots_used : 0;
    c.ready = node.state == NodeState::kReady;
    c.schedulable = node.schedulable;
    c.healthy = node.healthy;
    c.labels.insert(node.info.labels().begin(), node.info.labels().end());
    c.allocatable = AllocatableOf(node.info);
    c.free_resources = c.allocatable;
    if (auto r = used_resources.find(name); r != used_resources.end()) {
      c.free_resources -= r->second;
    }
    for (const auto& t : node.info.taints()) c.taints.push_back({t.key(), t.value(), t.effect()});
    capacity.push_back(std::move(c));
  }
  return capacity;
}

}  // namespace trainlet::coordinator
