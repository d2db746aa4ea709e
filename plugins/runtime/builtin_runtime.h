// The base of trainlet's own runtime plugins. They are written against trainlet's Status and
// Result (common/status.h), like the rest of the tree; this class is the one place that turns
// those into the public PluginResult of the RuntimePlugin interface, so each plugin states its
// three steps once and a third-party plugin (which sees only include/trainlet/) is not affected.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "plugins/plugin_status.h"
#include "trainlet/runtime_plugin.h"

namespace trainlet {

class BuiltinRuntime : public RuntimePlugin {
 public:
  PluginResult<uint32_t> ProcsPerNode(std::string_view num_proc_per_node,
                                      const v1::Topology* topology) const final {
    return ToPluginResult(CountProcs(num_proc_per_node, topology));
  }
  PluginResult<AttemptLayout> Layout(const PlanRequest& request) const final {
    return ToPluginResult(LayOut(request));
  }
  PluginResult<std::vector<v1::LaunchPlan>> Render(const PlanRequest& request,
                                                   const AttemptLayout& layout) const final {
    if (layout.nodes.size() != request.nodes.size()) {  // MakePlans may index both by node rank
      return PluginStatus(PluginErrorCode::kInternal,
                          std::string(name()) + " render: a layout of " +
                              std::to_string(layout.nodes.size()) + " nodes for a placement of " +
                              std::to_string(request.nodes.size()));
    }
    return ToPluginResult(MakePlans(request, layout));
  }

 protected:
  // RuntimePlugin::ProcsPerNode, Layout and Render, with the same contracts. MakePlans is given
  // a layout with one entry per node of `request`.
  virtual Result<uint32_t> CountProcs(std::string_view num_proc_per_node,
                                      const v1::Topology* topology) const = 0;
  virtual Result<AttemptLayout> LayOut(const PlanRequest& request) const = 0;
  virtual Result<std::vector<v1::LaunchPlan>> MakePlans(const PlanRequest& request,
                                                        const AttemptLayout& layout) const = 0;
};

}  // namespace trainlet
