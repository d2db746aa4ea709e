#include "trainletctl/admit_check_command.h"

#include <iostream>
#include <utility>

#include "trainletctl/command_support.h"

namespace trainlet::cli {

int CmdAdmitCheck(const CommonFlags& f, const std::string& kind_arg, const std::string& name_arg,
                  const std::string& check) {
  const auto name = TrainJobNamed("admit-check", kind_arg, name_arg, f.all_namespaces);
  if (!name.ok()) return PrintError(name.status().message());
  if (check.empty()) return PrintError("admit-check: --check NAME is required");
  v1::OperatorRequest req;
  req.mutable_admit_check()->set_name(*name);
  req.mutable_admit_check()->set_namespace_(f.ns);
  req.mutable_admit_check()->set_check(check);
  auto client = ConnectCoordinator(f);
  if (!client.ok()) return PrintError(client.status().message());
  const auto resp = (*client)->Call(std::move(req));
  if (!resp.ok()) return PrintError(resp.status().message());
  const auto& r = resp->admit_check();
  std::cout << "trainjob/" << *name << ": admission check " << check
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
