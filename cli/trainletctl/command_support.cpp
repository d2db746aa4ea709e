#include "trainletctl/command_support.h"

#include <algorithm>
#include <cctype>
#include <iostream>

#include "trainletctl/client_config.h"

namespace trainlet::cli {

Result<std::unique_ptr<CoordinatorClient>> ConnectCoordinator(const CommonFlags& f) {
  TRAINLET_ASSIGN_OR_RETURN(auto config, LoadClientConfig(ResolveHome(f.home)));
  if (f.request_timeout_ms > 0) {
    config.request_timeout = std::chrono::milliseconds(f.request_timeout_ms);
  }
  return CoordinatorClient::Connect(config);
}

Result<std::string> TrainJobNamed(std::string_view verb, const std::string& kind_arg,
                                  const std::string& name_arg, bool all_namespaces) {
  std::string kind = kind_arg;
  std::string name = name_arg;
  if (auto slash = kind.find('/'); slash != std::string::npos && name.empty()) {
    name = kind.substr(slash + 1);
    kind = kind.substr(0, slash);
  }
  std::transform(kind.begin(), kind.end(), kind.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (auto dot = kind.find('.'); dot != std::string::npos) kind = kind.substr(0, dot);
  if ((kind != "trainjob" && kind != "trainjobs" && kind != "tj") || name.empty()) {
    return InvalidError(std::string(verb) + ": expected trainjob NAME, got \"" + kind_arg +
                        (name_arg.empty() ? "" : " " + name_arg) + "\"");
  }
  if (all_namespaces) {
    return InvalidError(std::string(verb) +
                        ": a trainjob cannot be named across all namespaces (-A); use -n "
                        "NAMESPACE");
  }
  return name;
}

bool NamedAcrossNamespaces(const CommonFlags& f, const std::string& name) {
  if (!f.all_namespaces || name.empty()) return false;
  PrintError("a trainjob cannot be named across all namespaces (-A); use -n NAMESPACE");
  return true;
}

int PrintError(const std::string& message) {
  std::cerr << "error: " << message << "\n";
  return 1;
}

}  // namespace trainlet::cli
