// `trainletctl keys create|list`: CURVE keys for a real deployment.
#pragma once

#include <string>

namespace trainlet::cli {

// Writes DIR/NAME.key (0600) and DIR/NAME.key.pub and, with an allowlist, enrols the public key.
int CmdKeysCreate(const std::string& dir, const std::string& name, const std::string& role,
                  const std::string& allowlist);
// Lists the key files in DIR and the entries of its allowlists.
int CmdKeysList(const std::string& dir, const std::string& output);

}  // namespace trainlet::cli
