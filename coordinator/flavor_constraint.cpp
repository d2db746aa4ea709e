#include "coordinator/flavor_constraint.h"

#include <set>
#include <string>

namespace trainlet::coordinator {

Result<FlavorConstraint> FlavorConstraintOf(const v1::JobStatus& status,
                                            const QueueCatalog& catalog) {
  FlavorConstraint out;
  if (!status.has_admission() || status.admission().unmanaged()) return out;
  std::set<std::string> seen;
  for (const v1::AssignedResource& r : status.admission().resources()) {
    if (r.flavor().empty() || !seen.insert(r.flavor()).second) continue;
    const kueue::ResourceFlavor* f = catalog.FindFlavor(r.flavor());
    if (f == nullptr) {
      return NotFoundError("admitted to ResourceFlavor " + r.flavor() +
                           ", which no longer exists: it is placed once the flavor is applied "
                           "again (its nodeLabels say which nodes are its)");
    }
    out.flavors += (out.flavors.empty() ? "" : ", ") + r.flavor();
    for (const auto& [key, value] : f->node_labels) {
      auto [it, added] = out.node_labels.emplace(key, value);
      if (!added && it->second != value) {
        return InvalidError("admitted to ResourceFlavors " + out.flavors +
                            ", whose nodeLabels disagree on " + key + " (" + it->second + ", " +
                            value + "): no node can be of both");
      }
    }
    for (const kueue::Toleration& t : f->tolerations) {
      out.tolerations.push_back({t.key, t.op, t.value, t.effect});
    }
  }
  return out;
}

}  // namespace trainlet::coordinator
