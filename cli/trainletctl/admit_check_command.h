// trainletctl admit-check trainjob/NAME --check X: marks admission check X of the job's
// ClusterQueue Ready (Kueue's admission checks, issue 14). Kueue leaves checks to external
// controllers; trainlet has none, so an admin acts as one. Admins only.
#pragma once

#include <string>

#include "trainletctl/commands.h"

namespace trainlet::cli {

// `kind` is "trainjob" (or "trainjob/NAME" with `name` empty). Prints "trainjob/NAME: admission
// check X Ready" and which checks it still waits for (or that it is admitted), and returns 0;
// prints "error: ..." on stderr and returns 1 when the job is unknown, finished, its
// ClusterQueue has no such check, the user is not an admin, or the change could not be stored.
int CmdAdmitCheck(const CommonFlags& f, const std::string& kind, const std::string& name,
                  const std::string& check);

}  // namespace trainlet::cli
