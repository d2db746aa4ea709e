// `plain`: a runtime whose mlPolicy names no framework. It starts numProcPerNode copies of the
// trainer command on every node, with only the TRAINLET_* env added.
#pragma once

#include <memory>

#include "trainlet/runtime_plugin.h"

namespace trainlet {

std::unique_ptr<RuntimePlugin> MakePlainRuntime();

}  // namespace trainlet
