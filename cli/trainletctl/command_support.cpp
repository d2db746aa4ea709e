#include "trainletctl/command_support.h"

#include <iostream>

#include "trainletctl/client_config.h"

namespace trainlet::cli {

Result<std::unique_ptr<CoordinatorClient>> ConnectCoordinator(const CommonFlags& f) {
  TRAINLET_ASSIGN_OR_RETURN(auto config, LoadClientConfig(ResolveHome(f.home)));
  return CoordinatorClient::Connect(config);
}

int PrintError(const std::string& message) {
  std::cerr << "error: " << message << "\n";
  return 1;
}

}  // namespace trainlet::cli
