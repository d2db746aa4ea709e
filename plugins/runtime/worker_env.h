// The env every worker gets, whatever its runtime (DESIGN.md "The life of a job", step 4).
#pragma once

#include <cstdint>
#include <string>

#include "trainlet/runtime_plugin.h"

namespace trainlet {

struct RankCoordinates {
  uint32_t rank;
  uint32_t local_rank;
  uint32_t node_rank;
  uint32_t world_size;
  uint32_t local_world_size;
};

// Adds the trainer env (in order; later entries win) and then the TRAINLET_* variables, which
// the user's env cannot override.
void AddCommonWorkerEnv(const PlanRequest& request, const RankCoordinates& at,
                        v1::WorkerSpec& worker);

// Adds the TRAINLET_EXEC_* variables trainlet-exec reads (the request's launcher credentials).
void AddExecCredentialEnv(const PlanRequest& request, v1::WorkerSpec& worker);

// Parses a positive integer count for `field`; "" gives `fallback`.
Result<uint32_t> ParseProcCount(std::string_view text, std::string_view field, uint32_t fallback);

}  // namespace trainlet
