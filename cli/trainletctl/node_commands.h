// trainletctl cordon / uncordon / drain: take a node out of placement, and empty it.
// Each returns the process exit code and prints its own errors ("error: ..." on stderr).
#pragma once

#include <string>

#include "trainletctl/commands.h"

namespace trainlet::cli {

// `node` is "NAME" or "node/NAME". Cordon keeps new ranks off the node; what runs there keeps
// running. The state is kept by the coordinator across the agent's re-registrations.
int CmdCordon(const CommonFlags& f, const std::string& node, bool cordon,
              const std::string& reason);

// Cordons the node, then waits until no rank runs there (polling), or `timeout` ("5m"; "0" waits
// forever) passes: exit 0 when empty, 1 on timeout (the node stays cordoned). With `force`, every
// job with a rank on the node has its attempt failed with cause "node drained", so it restarts
// elsewhere (within its restart limit).
int CmdDrain(const CommonFlags& f, const std::string& node, bool force, const std::string& timeout,
             const std::string& reason);

}  // namespace trainlet::cli
