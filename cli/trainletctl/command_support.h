// What every trainletctl command that talks to a coordinator does first and last: connect with
// the flags' TRAINLET_HOME, and print an error as "error: ..." on stderr; and, for the commands
// that act on one trainjob (suspend, resume, admit-check), read the job's name.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "common/status.h"
#include "trainletctl/commands.h"
#include "trainletctl/coordinator_client.h"

namespace trainlet::cli {

// A client of the coordinator that --home (else $TRAINLET_HOME, else ~/.trainlet) names.
Result<std::unique_ptr<CoordinatorClient>> ConnectCoordinator(const CommonFlags& f);

// The job's name from `KIND NAME` or `KIND/NAME`, KIND being trainjob, trainjobs or tj in any
// case, with or without its group (`trainjob.trainer.kubeflow.org`). Refused, naming `verb` and
// what was given: another kind, no name, or -A (one job lives in one namespace).
Result<std::string> TrainJobNamed(std::string_view verb, const std::string& kind_arg,
                                  const std::string& name_arg, bool all_namespaces);

// A trainjob is named in one namespace: -A lists, it does not name. True (and the error printed)
// when `name` is given with -A.
bool NamedAcrossNamespaces(const CommonFlags& f, const std::string& name);

// Prints "error: <message>" on stderr and returns 1, the exit code of a failed command.
int PrintError(const std::string& message);

}  // namespace trainlet::cli
