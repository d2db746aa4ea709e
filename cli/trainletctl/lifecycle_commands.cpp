#include "trainletctl/lifecycle_commands.h"

#include <iostream>
#include <utility>

#include "trainletctl/command_support.h"
#include "trainletctl/state_text.h"

namespace trainlet::cli {

int CmdSetSuspend(const CommonFlags& f, const std::string& kind_arg, const std::string& name_arg,
                  bool suspend) {
  const auto name =
      TrainJobNamed(suspend ? "suspend" : "resume", kind_arg, name_arg, f.all_namespaces);
  if (!name.ok()) return PrintError(name.status().message());
  v1::OperatorRequest req;
  req.mutable_suspend_job()->set_name(*name);
  req.mutable_suspend_job()->set_namespace_(f.ns);
  req.mutable_suspend_job()->set_suspend(suspend);
  auto client = ConnectCoordinator(f);
  if (!client.ok()) return PrintError(client.status().message());
  const auto resp = (*client)->Call(std::move(req));
  if (!resp.ok()) return PrintError(resp.status().message());
  const auto& r = resp->suspend_job();
  if (r.changed()) {
    std::cout << "trainjob/" << *name << (suspend ? " suspended" : " resumed") << "\n";
  } else {
    std::cout << "trainjob/" << *name << (suspend ? " already suspended" : " is not suspended")
              << " (" << PhaseText(r) << ")\n";
  }
  return 0;
}

}  // namespace trainlet::cli
