#include "trainletctl/admit_check_command.h"

#include <algorithm>
#include <iostream>

#include "trainletctl/client_config.h"
#include "trainletctl/coordinator_client.h"

namespace trainlet::cli {

int CmdAdmitCheck(const CommonFlags& f, const std::string& kind_arg, const std::string& name_arg,
                  const std::string& check) {
  std::string kind = kind_arg;
  std::string name = name_arg;
  if (auto slash = kind.find('/'); slash != std::string::npos && name.empty()) {
    name = kind.substr(slash + 1);
    kind = kind.substr(0, slash);
  }
  std::transform(kind.begin(), kind.end(), kind.begin(), ::tolower);
  if (auto dot = kind.find('.'); dot != std::string::npos) kind = kind.substr(0, dot);
  if ((kind != "trainjob" && kind != "trainjobs" && kind != "tj") || name.empty()) {
    std::cerr << "error: admit-check: expected trainjob NAME, got \"" << kind_arg
              << (name_arg.empty() ? "" : " " + name_arg) << "\"\n";
    return 1;
  }
  if (check.empty()) {
    std::cerr << "error: admit-check: --check NAME is required\n";
    return 1;
  }
  if (f.all_namespaces) {
    std::cerr << "error: admit-check: a trainjob cannot be named across all namespaces (-A); "
              << "use -n NAMESPACE\n";
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
  req.mutable_admit_check()->set_name(name);
  req.mutable_admit_check()->set_namespace_(f.ns);
  req.mutable_admit_check()->set_check(check);
  auto resp = (*client)->Call(req);
  if (!resp.ok()) {
    std::cerr << "error: " << resp.status().message() << "\n";
    return 1;
  }
  const auto& r = resp->admit_check();
  std::cout << "trainjob/" << name << ": admission check " << check
            << (r.changed() ? " Ready" : " was Ready already");
  if (r.waiting().empty()) {
    std::cout << "; no admission check left\n";
  } else {
    std::string left;
    for (const auto& w : r.waiting()) left += (left.empty() ? "" : ", ") + w;
    std::cout << "; still waiting for " << left << "\n";
  }
  return 0;
}

}  // namespace trainlet::cli
