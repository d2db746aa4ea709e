// The built-in runtime plugins, in one ordered table. Adding a runtime means adding its folder
// and one line here.
#include <functional>

#include "plugins/runtime/mpi/mpi_runtime.h"
#include "plugins/runtime/plain/plain_runtime.h"
#include "trainlet/runtime_plugin.h"

namespace trainlet {
namespace {

struct PluginEntry {
  const char* framework;
  std::unique_ptr<RuntimePlugin> (*make)();
};

constexpr PluginEntry kBuiltinRuntimes[] = {
    {"plain", &MakePlainRuntime},
    {"mpi", &MakeMpiRuntime},
};

const std::vector<std::unique_ptr<RuntimePlugin>>& Instances() {
  static const auto* instances = [] {
    auto* v = new std::vector<std::unique_ptr<RuntimePlugin>>();
    for (const auto& e : kBuiltinRuntimes) v->push_back(e.make());
    return v;
  }();
  return *instances;
}

}  // namespace

const RuntimePlugin* FindRuntimePlugin(std::string_view framework) {
  for (const auto& p : Instances()) {
    if (p->name() == framework) return p.get();
  }
  return nullptr;
}

const RuntimePlugin* SelectRuntimePlugin(std::string_view framework,
                                         const std::map<std::string, std::string>& /*labels*/) {
  return FindRuntimePlugin(framework);
}

std::vector<std::string> RuntimePluginNames() {
  std::vector<std::string> names;
  for (const auto& e : kBuiltinRuntimes) names.emplace_back(e.framework);
  return names;
}

}  // namespace trainlet
