// What every trainletctl command that talks to a coordinator does first and last: connect with
// the flags' TRAINLET_HOME, and print an error as "error: ..." on stderr.
#pragma once

#include <memory>
#include <string>

#include "common/status.h"
#include "trainletctl/commands.h"
#include "trainletctl/coordinator_client.h"

namespace trainlet::cli {

// A client of the coordinator that --home (else $TRAINLET_HOME, else ~/.trainlet) names.
Result<std::unique_ptr<CoordinatorClient>> ConnectCoordinator(const CommonFlags& f);

// Prints "error: <message>" on stderr and returns 1, the exit code of a failed command.
int PrintError(const std::string& message);

}  // namespace trainlet::cli
