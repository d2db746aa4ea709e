#include "trainletctl/lifecycle_commands.h"

#include <algorithm>
#include <iostream>

#include "trainletctl/client_config.h"
#include "trainletctl/coordinator_client.h"
#include "trainletctl/state_text.h"

namespace trainlet::cli {

int CmdSetSuspend(const CommonFlags& f, const std::string& kind_arg, const std::string& name_arg,
                  bool suspend) {
  const char* verb = suspend ? "suspend" : "resume";
  std::string kind = kind_arg;
  std::string name = name_arg;
  if (auto slash = kind.find('/'); slash != std::string::npos && name.empty()) {
    name = kind.substr(slash + 1);
    kind = kind.substr(0, slash);
  }
  std::transform(kind.begin(), kind.end(), kind.begin(), ::tolower);
  if (auto dot = kind.find('.'); dot != std::string::npos) kind = kind.substr(0, dot);
  if ((kind != "trainjob" && kind != "trainjobs" && kind != "tj") || name.empty()) {
    std::cerr << "error: " << verb << ": expected trainjob NAME, got \"" << kind_arg
              << (name_arg.empty() ? "" : " " + name_arg) << "\"\n";
    return 1;
  }
  auto config = LoadClientConfig(ResolveHome(f.home));
  if (!config.ok()) {
    std::cerr << "error: " << config.status().message() << "\n";
    return 1;
  }
  auto client = CoordinatorClient::Connect(*config);
  if (!client.ok()) {
    std::cerr << "error: " << client.status().message() << "\n";
    return 1;
  }
  v1::OperatorRequest req;
  if (f.all_namespaces) {
    std::cerr << "error: " << verb << ": a trainjob cannot be named across all namespaces (-A); "
              << "use -n NAMESPACE\n";
    return 1;
  }
  req.mutable_suspend_job()->set_name(name);
  req.mutable_suspend_job()->set_namespace_(f.ns);
  req.mutable_suspend_job()->set_suspend(suspend);
  auto resp = (*client)->Call(req);
  if (!resp.ok()) {
    std::cerr << "error: " << resp.status().message() << "\n";
    return 1;
  }
  const auto& r = resp->suspend_job();
  if (r.changed()) {
    std::cout << "trainjob/" << name << (suspend ? " suspended" : " resumed") << "\n";
  } else {
    std::cout << "trainjob/" << name << (suspend ? " already suspended" : " is not suspended")
              << " (" << PhaseText(r) << ")\n";
  }
  return 0;
}

}  // namespace trainlet::cli
