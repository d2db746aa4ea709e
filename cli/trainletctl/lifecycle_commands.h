// trainletctl suspend|resume trainjob NAME: sets a TrainJob's spec.suspend on the coordinator,
// as `apply` of the same TrainJob with only spec.suspend changed does.
#pragma once

#include <string>

#include "trainletctl/commands.h"

namespace trainlet::cli {

// Suspending stops every rank and keeps the job (condition Suspended); resuming starts a new
// attempt. `kind` is "trainjob" (or "trainjob/NAME" with `name` empty). Prints
// "trainjob/NAME suspended" (or "resumed", or "... already suspended") and returns 0; prints
// "error: ..." on stderr and returns 1 when the job is unknown, finished, being deleted, or the
// coordinator could not store the change.
int CmdSetSuspend(const CommonFlags& f, const std::string& kind, const std::string& name,
                  bool suspend);

}  // namespace trainlet::cli
