// Logging setup shared by the daemons: spdlog to stderr with the component name.
#pragma once

#include <string>

namespace trainlet {

// level: trace, debug, info, warn, error. Unknown names fall back to info.
void SetUpLogging(const std::string& component, const std::string& level);

}  // namespace trainlet
