#include "coordinator/pass_capacity.h"

#include <functional>
#include <utility>

#include "coordinator/placement_inputs.h"

namespace trainlet::coordinator {
namespace {

// Appends `s` with its length first, so no two different inputs give the same key.
void AppendField(std::string& key, std::string_view s) {
  key += std::to_string(s.size());
  key += ':';
  key += s;
}

}  // namespace

uint64_t NodeHash(const NodeCapacity& node) {
  std::string key;
  AppendField(key, node.name);
  key += std::to_string(node.total_slots) + "/" + std::to_string(node.free_slots) + "/" +
         (node.ready ? "r" : "-") + (node.schedulable ? "s" : "-") + (node.healthy ? "h" : "-");
  for (int64_t amount : node.free_resources.amount) key += std::to_string(amount) + ",";
  for (int64_t amount : node.allocatable.amount) key += std::to_string(amount) + ",";
  for (const auto& [k, v] : node.labels) {
    AppendField(key, k);
    AppendField(key, v);
  }
  key += "|";
  for (const auto& t : node.taints) {
    for (const std::string* f : {&t.key, &t.value, &t.effect}) AppendField(key, *f);
  }
  return std::hash<std::string>{}(key);
}

std::string ShapeKey(const GangRequest& request) {
  std::string key =
      std::to_string(request.num_nodes) + "x" + std::to_string(request.slots_per_node) + "|";
  for (int64_t amount : request.resources.amount) key += std::to_string(amount) + ",";
  key += "|";
  for (const auto& [k, v] : request.node_selector) {
    AppendField(key, k);
    AppendField(key, v);
  }
  key += "|";
  for (const auto& t : request.tolerations) {
    for (const std::string* f : {&t.key, &t.op, &t.value, &t.effect}) AppendField(key, *f);
  }
  // The flavor: its labels and tolerations narrow the nodes, its name is in the message.
  key += "|";
  AppendField(key, request.flavor.flavors);
  for (const auto& [k, v] : request.flavor.node_labels) {
    AppendField(key, k);
    AppendField(key, v);
  }
  key += "|";
  for (const auto& t : request.flavor.tolerations) {
    for (const std::string* f : {&t.key, &t.op, &t.value, &t.effect}) AppendField(key, *f);
  }
  return key;
}

PassCapacity::PassCapacity(const NodeRegistry& registry,
                           const std::map<std::string, uint32_t>& used_slots,
                           const std::map<std::string, Resources>& used_resources)
    : nodes_(NodeCapacities(registry, used_slots, used_resources)) {
  index_.reserve(nodes_.size());
  for (size_t i = 0; i < nodes_.size(); ++i) {
    index_.emplace(nodes_[i].name, i);
    fingerprint_ += NodeHash(nodes_[i]);
  }
}

Result<Placement> PassCapacity::Place(const GangRequest& request) {
  std::string key = ShapeKey(request);
  if (auto it = failed_.find(key); it != failed_.end()) {
    ++remembered_;
    return it->second;
  }
  ++planned_;
  auto placement = PlaceGang(request, nodes_);
  // Only "does not fit now" is remembered: room shrinks during a pass, so it stays true. Other
  // errors (an invalid request) are the request's own and are answered by the planner each time.
  if (!placement.ok() && placement.status().code() == ErrorCode::kUnavailable) {
    failed_.emplace(std::move(key), placement.status());
  }
  return placement;
}

void PassCapacity::Charge(const std::vector<std::string>& nodes, uint32_t slots,
                          const Resources& resources) {
  for (const auto& name : nodes) {
    auto it = index_.find(name);
    if (it == index_.end()) continue;  // placed on a node the snapshot lacks: nothing to charge
    NodeCapacity& node = nodes_[it->second];
    fingerprint_ -= NodeHash(node);
    node.free_slots = node.free_slots > slots ? node.free_slots - slots : 0;
    node.free_resources -= resources;
    fingerprint_ += NodeHash(node);
  }
}

uint32_t PassCapacity::FreeSlots(const std::string& node) const {
  auto it = index_.find(node);
  return it == index_.end() ? 0 : nodes_[it->second].free_slots;
}

}  // namespace trainlet::coordinator
