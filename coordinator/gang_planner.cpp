#include "coordinator/gang_planner.h"

#include <algorithm>

namespace trainlet::coordinator {

namespace {

using Candidates = std::vector<const NodeCapacity*>;

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

std::string Count(size_t n, const char* singular, const char* plural) {
  return std::to_string(n) + " " + (n == 1 ? singular : plural);
}

// Best fit: the fullest node that still fits comes first.
bool BestFitLess(const NodeCapacity* a, const NodeCapacity* b) {
  if (a->free_slots != b->free_slots) return a->free_slots < b->free_slots;
  return a->name < b->name;
}

// Free slots summed over the `k` nodes a best-fit choice from `sorted` (best-fit order) takes:
// the smaller, the tighter the packing, and the more room other groups keep whole.
uint64_t ChosenFreeSlots(const Candidates& sorted, size_t k) {
  uint64_t sum = 0;
  for (size_t i = 0; i < k; ++i) sum += sorted[i]->free_slots;
  return sum;
}

// Narrows `candidates` (best-fit order, kept) to the best group sharing a value of `label` that
// can hold `k` nodes; leaves them unchanged when no group can.
void NarrowToBestGroup(Candidates& candidates, std::string_view label, size_t k) {
  // std::map: groups come out ordered by value, which breaks ties deterministically.
  std::map<std::string_view, Candidates> groups;
  const std::string key(label);
  for (const NodeCapacity* n : candidates) {
    auto it = n->labels.find(key);
    if (it == n->labels.end()) continue;
    groups[it->second].push_back(n);  // inherits best-fit order
  }
  Candidates* best = nullptr;
  uint64_t best_free = 0;
  for (auto& [value, members] : groups) {
    if (members.size() < k) continue;
    uint64_t free = ChosenFreeSlots(members, k);
    if (best == nullptr || free < best_free) {
      best = &members;
      best_free = free;
    }
  }
  if (best != nullptr) candidates = std::move(*best);
}

Status Unplaceable(const GangRequest& req, const std::vector<NodeCapacity>& nodes) {
  size_t ready = 0, cordoned = 0, fit = 0;
  for (const NodeCapacity& n : nodes) {
    if (!n.ready) continue;
    if (!n.schedulable) {
      ++cordoned;
      continue;
    }
    ++ready;
    if (n.free_slots >= req.slots_per_node) ++fit;
  }
  std::string slots = Count(req.slots_per_node, "free slot", "free slots");
  std::string msg = "needs " + Count(req.num_nodes, "node", "nodes") + " with " + slots + " each; ";
  if (nodes.empty()) return UnavailableError(msg + "no nodes are registered");
  msg += std::to_string(ready) + " of " + Count(nodes.size(), "node", "nodes") +
         (ready == 1 ? " is" : " are") + " Ready and schedulable, " + std::to_string(fit) +
         " of them " + (fit == 1 ? "has " : "have ") + slots;
  if (cordoned > 0) {
    msg += "; " + Count(cordoned, "Ready node is", "Ready nodes are") + " cordoned";
  }
  return UnavailableError(msg);
}

}  // namespace

bool NaturalNameLess(std::string_view a, std::string_view b) {
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (IsDigit(a[i]) && IsDigit(b[j])) {
      size_t ie = i, je = j;
      while (ie < a.size() && IsDigit(a[ie])) ++ie;
      while (je < b.size() && IsDigit(b[je])) ++je;
      std::string_view da = a.substr(i, ie - i), db = b.substr(j, je - j);
      da.remove_prefix(std::min(da.find_first_not_of('0'), da.size()));
      db.remove_prefix(std::min(db.find_first_not_of('0'), db.size()));
      if (da.size() != db.size()) return da.size() < db.size();
      if (da != db) return da < db;
      i = ie;
      j = je;
      continue;
    }
    if (a[i] != b[j]) return static_cast<unsigned char>(a[i]) < static_cast<unsigned char>(b[j]);
    ++i;
    ++j;
  }
  if ((a.size() - i) != (b.size() - j)) return (a.size() - i) < (b.size() - j);
  return a < b;  // equal but for leading zeros
}

Result<Placement> PlaceGang(const GangRequest& request, const std::vector<NodeCapacity>& nodes) {
  if (request.num_nodes == 0) return InvalidError("gang: num_nodes must be >= 1");
  if (request.slots_per_node == 0) return InvalidError("gang: slots_per_node must be >= 1");

  Candidates candidates;
  for (const NodeCapacity& n : nodes) {
    if (n.ready && n.schedulable && n.free_slots >= request.slots_per_node) {
      candidates.push_back(&n);
    }
  }
  const size_t k = request.num_nodes;
  if (candidates.size() < k) return Unplaceable(request, nodes);

  std::sort(candidates.begin(), candidates.end(), BestFitLess);
  for (std::string_view label : {kZoneLabel, kRackLabel}) {
    NarrowToBestGroup(candidates, label, k);
  }

  candidates.resize(k);
  std::sort(candidates.begin(), candidates.end(), [](const NodeCapacity* a, const NodeCapacity* b) {
    return NaturalNameLess(a->name, b->name);
  });
  Placement placement;
  placement.nodes.reserve(k);
  for (const NodeCapacity* n : candidates) placement.nodes.push_back(n->name);
  return placement;
}

}  // namespace trainlet::coordinator
