// Where trainletctl finds its coordinator and keys.
//
// TRAINLET_HOME (default ~/.trainlet, overridden by --home) holds config.yaml:
//     coordinator: tcp://127.0.0.1:7071        # the operator endpoint
//                                                 # or several (high availability): a YAML list,
//                                                 # or one string, comma-separated
//     coordinator_key: keys/coordinator.key.pub # the coordinator's public key
//     key: keys/operator.key                     # this operator's key pair
// Relative paths are relative to the home directory.
#pragma once

#include <chrono>
#include <string>

#include "common/status.h"

namespace trainlet::cli {

struct ClientConfig {
  std::string home;
  std::string coordinator;  // operator endpoints, comma-separated (one, or an HA set)
  std::string coordinator_key_file;
  std::string key_file;
  // How long one request waits for its answer (trainletctl --request-timeout; not in the file).
  std::chrono::milliseconds request_timeout{std::chrono::seconds(15)};
};

// --home if given, else $TRAINLET_HOME, else ~/.trainlet.
std::string ResolveHome(const std::string& flag);
Result<ClientConfig> LoadClientConfig(const std::string& home);
Status SaveClientConfig(const ClientConfig& config);

}  // namespace trainlet::cli
