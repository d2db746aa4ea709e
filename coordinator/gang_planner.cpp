#include "coordinator/gang_planner.h"

#include <algorithm>
#include <array>

#include "coordinator/taint_rules.h"

namespace trainlet::coordinator {

namespace {

using Candidates = std::vector<const NodeCapacity*>;

constexpr std::string_view kHostnameLabel = "kubernetes.io/hostname";

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

std::string Count(size_t n, const char* singular, const char* plural) {
  return std::to_string(n) + " " + (n == 1 ? singular : plural);
}

// The packing order's keys, computed once per candidate so the sort compares integers.
struct FitKey {
  int64_t unasked_gpus = 0;  // GPUs of kinds the job does not ask for
  int64_t free_gpus = 0;     // free GPUs of the kinds it asks for
  uint32_t free_slots = 0;
  const NodeCapacity* node = nullptr;
};

bool FitLess(const FitKey& a, const FitKey& b) {
  if (a.unasked_gpus != b.unasked_gpus) return a.unasked_gpus < b.unasked_gpus;
  if (a.free_gpus != b.free_gpus) return a.free_gpus < b.free_gpus;
  if (a.free_slots != b.free_slots) return a.free_slots < b.free_slots;
  return a.node->name < b.node->name;
}

FitKey KeyOf(const NodeCapacity& n, const Resources& request) {
  FitKey k;
  k.node = &n;
  k.free_slots = n.free_slots;
  for (ResourceKind gpu :
       {ResourceKind::kNvidiaGpu, ResourceKind::kAmdGpu, ResourceKind::kAppleGpu}) {
    if (request[gpu] > 0) {
      k.free_gpus += n.free_resources[gpu];
    } else {
      k.unasked_gpus += n.allocatable[gpu];
    }
  }
  return k;
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

// "ResourceFlavor a100's nodeLabels gpu=a100"; "" when the flavor constrains no label (a flavor
// without nodeLabels lets the gang go anywhere, as in Kueue).
std::string FlavorText(const FlavorConstraint& flavor) {
  if (flavor.node_labels.empty()) return "";
  const bool many = flavor.flavors.find(',') != std::string::npos;
  return std::string(many ? "ResourceFlavors " : "ResourceFlavor ") + flavor.flavors +
         (many ? "' nodeLabels " : "'s nodeLabels ") + FormatSelector(flavor.node_labels);
}

// The job's nodeSelector and its flavor's nodeLabels (Kueue puts both into the pod's
// nodeSelector); a node taint is tolerated by the job's or the flavor's tolerations.
bool Selected(const GangRequest& req, const NodeCapacity& n) {
  return MatchesSelector(req.node_selector, n.labels, n.name) &&
         MatchesSelector(req.flavor.node_labels, n.labels, n.name);
}

bool Tolerated(const GangRequest& req, const NodeCapacity& n) {
  for (const NodeTaint& taint : n.taints) {
    if (TaintBlocks(taint) && !ToleratesTaint(req.tolerations, taint) &&
        !ToleratesTaint(req.flavor.tolerations, taint)) {
      return false;
    }
  }
  return true;
}

// "" unless too few of the nodes the gang may use have its slots per node at all, even empty: then
// it waits for good until a node's slot count is raised, so the reason says how (issue 19: a
// 4-ranks-per-node job on a local cluster of 2-PU agents waited without a word why).
std::string NeverFitsHint(const GangRequest& req, const std::vector<NodeCapacity>& nodes) {
  size_t usable = 0, big_enough = 0;
  for (const NodeCapacity& n : nodes) {
    if (!n.ready || !n.schedulable || !n.healthy || !Selected(req, n) || !Tolerated(req, n)) {
      continue;
    }
    ++usable;
    if (n.total_slots >= req.slots_per_node) ++big_enough;
  }
  if (big_enough >= req.num_nodes || big_enough == usable) return "";
  const std::string n = std::to_string(req.slots_per_node);
  return "; " + std::to_string(big_enough) + " of them " + (big_enough == 1 ? "has " : "have ") +
         n + " slots in all, so it waits until nodes get more (trainlet-agent --slots " + n +
         ", or trainletctl local up --slots " + n + ")";
}

// Counts the nodes through each filter in turn (the same order as the candidate test), so the
// message shows where the gang is lost.
Status Unplaceable(const GangRequest& req, const std::vector<NodeCapacity>& nodes) {
  size_t ready = 0, cordoned = 0, unhealthy = 0, selected = 0, flavored = 0, tolerated = 0, fit = 0;
  std::array<size_t, kNumResourceKinds> covered{};
  bool taints_matter = false;
  for (const NodeCapacity& n : nodes) {
    if (!n.ready) continue;
    if (!n.schedulable) {
      ++cordoned;
      continue;
    }
    if (!n.healthy) {
      ++unhealthy;
      continue;
    }
    ++ready;
    if (!MatchesSelector(req.node_selector, n.labels, n.name)) continue;
    ++selected;
    if (!MatchesSelector(req.flavor.node_labels, n.labels, n.name)) continue;
    ++flavored;
    if (!Tolerated(req, n)) {
      taints_matter = true;
      continue;
    }
    ++tolerated;
    if (n.free_slots < req.slots_per_node) continue;
    ++fit;
    for (int i = 0; i < kNumResourceKinds; ++i) {
      if (n.free_resources.amount[i] < req.resources.amount[i]) break;
      ++covered[i];
    }
  }
  std::string slots = Count(req.slots_per_node, "free slot", "free slots");
  const std::string asked = FormatResources(req.resources);
  std::string msg = "needs " + Count(req.num_nodes, "node", "nodes") + " with " + slots +
                    (asked.empty() ? "" : ", " + asked) + " each; ";
  if (nodes.empty()) return UnavailableError(msg + "no nodes are registered");
  msg += std::to_string(ready) + " of " + Count(nodes.size(), "node", "nodes") +
         (ready == 1 ? " is" : " are") + " Ready and schedulable";
  auto stage = [&msg](size_t n, const std::string& what_one, const std::string& what_many) {
    msg += ", " + std::to_string(n) + " of them " + (n == 1 ? what_one : what_many);
  };
  if (!req.node_selector.empty()) {
    const std::string sel = "nodeSelector " + FormatSelector(req.node_selector);
    stage(selected, "matches " + sel, "match " + sel);
  }
  const std::string flavor = FlavorText(req.flavor);
  if (!flavor.empty()) stage(flavored, "matches " + flavor, "match " + flavor);
  if (taints_matter) stage(tolerated, "tolerates its taints", "tolerate their taints");
  stage(fit, "has " + slots, "have " + slots);
  msg += NeverFitsHint(req, nodes);
  for (int i = 0; i < kNumResourceKinds; ++i) {
    if (req.resources.amount[i] == 0) continue;
    const auto kind = static_cast<ResourceKind>(i);
    const std::string what = std::string(ResourceName(kind)) + ": " +
                             FormatQuantity(kind, req.resources.amount[i]) + " free";
    stage(covered[i], "has " + what, "have " + what);
  }
  if (!flavor.empty() && selected > 0 && flavored == 0) {
    // Waits until a node with those labels comes: say how a node gets them.
    msg +=
        "; it waits for a node with those labels (the agent's labels config key, or "
        "trainletctl local up --labels)";
  }
  if (unhealthy > 0) {
    msg += "; " + Count(unhealthy, "Ready node is", "Ready nodes are") + " unhealthy";
  }
  if (cordoned > 0) {
    msg += "; " + Count(cordoned, "Ready node is", "Ready nodes are") + " cordoned";
  }
  return UnavailableError(msg);
}

bool IsCandidate(const NodeCapacity& n, const GangRequest& req) {
  return n.ready && n.schedulable && n.healthy && n.free_slots >= req.slots_per_node &&
         n.free_resources.Covers(req.resources) && Selected(req, n) && Tolerated(req, n);
}

}  // namespace

std::string FormatSelector(const std::map<std::string, std::string>& selector) {
  std::string out;
  for (const auto& [k, v] : selector) out += (out.empty() ? "" : ",") + k + "=" + v;
  return out;
}

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

  std::vector<FitKey> keys;
  for (const NodeCapacity& n : nodes) {
    if (IsCandidate(n, request)) keys.push_back(KeyOf(n, request.resources));
  }
  const size_t k = request.num_nodes;
  if (keys.size() < k) return Unplaceable(request, nodes);

  std::sort(keys.begin(), keys.end(), FitLess);
  Candidates candidates;
  candidates.reserve(keys.size());
  for (const FitKey& key : keys) candidates.push_back(key.node);
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

bool MatchesSelector(const std::map<std::string, std::string>& selector,
                     const std::map<std::string, std::string>& labels, std::string_view name) {
  for (const auto& [key, value] : selector) {
    auto it = labels.find(key);
    if (it != labels.end()) {
      if (it->second != value) return false;
    } else if (key != kHostnameLabel || value != name) {
      return false;
    }
  }
  return true;
}

bool ToleratesTaint(const std::vector<trainjob::Toleration>& tolerations, const NodeTaint& taint) {
  return std::any_of(tolerations.begin(), tolerations.end(),
                     [&](const trainjob::Toleration& t) { return TolerationMatches(t, taint); });
}

bool ToleratesAll(const std::vector<trainjob::Toleration>& tolerations,
                  const std::vector<NodeTaint>& taints) {
  for (const NodeTaint& taint : taints) {
    if (TaintBlocks(taint) && !ToleratesTaint(tolerations, taint)) return false;
  }
  return true;
}

std::string FormatTaint(const NodeTaint& taint) { return TaintText(taint); }

}  // namespace trainlet::coordinator
