// Moved to common/platform/process_spawner.h (the OS seam, platform::Env); these names keep agent
// code and its tests compiling unchanged.
#pragma once

#include "common/platform/process_spawner.h"

namespace trainlet::agent {
using platform::MakePosixProcessSpawner;
using platform::OpenWorkerLog;
using platform::ProcessSpawner;
}  // namespace trainlet::agent
