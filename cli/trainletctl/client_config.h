// Where trainletctl finds its coordinator and keys.
//
// TRAINLET_HOME (default ~/.trainlet, overridden by --home) holds config.yaml:
//     coordinator: tcp://127.0.0.1:7071        # the operator endpoint
//     coordinator_key: keys/coordinator.key.pub # the coordinator's public key
//     key: keys/operator.key                     # this operator's key pair
// Relative paths are relative to the home directory.
#pragma once

#include <string>

#include "common/status.h"

namespace trainlet::cli {

struct ClientConfig {
  std::string home;
  std::string coordinator;
  std::string coordinator_key_file;
  std::string key_file;
};

// --home if given, else $TRAINLET_HOME, else ~/.trainlet.
std::string ResolveHome(const std::string& flag);
Result<ClientConfig> LoadClientConfig(const std::string& home);
Status SaveClientConfig(const ClientConfig& config);

}  // namespace trainlet::cli
