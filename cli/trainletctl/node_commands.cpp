#include "trainletctl/node_commands.h"

#include <chrono>
#include <iostream>
#include <memory>
#include <thread>

#include "trainletctl/command_support.h"

namespace trainlet::cli {
namespace {

std::string NodeName(const std::string& arg) {
  if (arg.rfind("node/", 0) == 0) return arg.substr(5);
  if (arg.rfind("nodes/", 0) == 0) return arg.substr(6);
  return arg;
}

Result<std::unique_ptr<CoordinatorClient>> Connect(const CommonFlags& f) {
  return ConnectCoordinator(f);
}

std::string Join(const google::protobuf::RepeatedPtrField<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

}  // namespace

int CmdCordon(const CommonFlags& f, const std::string& node_arg, bool cordon,
              const std::string& reason) {
  const std::string node = NodeName(node_arg);
  auto client = Connect(f);
  if (!client.ok()) {
    std::cerr << "error: " << client.status().message() << "\n";
    return 1;
  }
  v1::OperatorRequest req;
  req.mutable_cordon_node()->set_node(node);
  req.mutable_cordon_node()->set_cordon(cordon);
  req.mutable_cordon_node()->set_reason(reason);
  auto resp = (*client)->Call(req);
  if (!resp.ok()) {
    std::cerr << "error: " << resp.status().message() << "\n";
    return 1;
  }
  const char* done = cordon ? "cordoned" : "uncordoned";
  std::cout << "node/" << node << " " << (resp->cordon_node().changed() ? "" : "already ") << done
            << "\n";
  return 0;
}

int CmdDrain(const CommonFlags& f, const std::string& node_arg, bool force,
             const std::string& timeout_text, const std::string& reason) {
  const std::string node = NodeName(node_arg);
  const int64_t timeout_ms = ParseDuration(timeout_text);
  if (timeout_ms < 0) {
    std::cerr << "error: --timeout: \"" << timeout_text << "\" is not a duration (e.g. 5m, 90s)\n";
    return 1;
  }
  auto client = Connect(f);
  if (!client.ok()) {
    std::cerr << "error: " << client.status().message() << "\n";
    return 1;
  }
  v1::OperatorRequest req;
  req.mutable_drain_node()->set_node(node);
  req.mutable_drain_node()->set_force(force);
  req.mutable_drain_node()->set_reason(reason);
  auto resp = (*client)->Call(req);
  if (!resp.ok()) {
    std::cerr << "error: " << resp.status().message() << "\n";
    return 1;
  }
  std::cout << "node/" << node << " cordoned\n";
  if (resp->drain_node().stopped_size() > 0) {
    std::cout << "stopping " << Join(resp->drain_node().stopped())
              << " (attempt failed: node drained)\n";
  }
  // Poll rather than hold a request open: each answer is small, and a drain may take hours.
  const auto start = std::chrono::steady_clock::now();
  uint32_t last_reported = UINT32_MAX;
  req.mutable_drain_node()->set_force(false);  // stop once; then only watch
  while (true) {
    const auto& d = resp->drain_node();
    if (d.running_ranks() == 0) {
      std::cout << "node/" << node << " drained\n";
      return 0;
    }
    if (d.running_ranks() != last_reported) {
      std::cout << "waiting for " << d.running_ranks()
                << (d.running_ranks() == 1 ? " rank" : " ranks") << " of " << Join(d.jobs())
                << " to end\n";
      last_reported = d.running_ranks();
    }
    if (timeout_ms > 0 &&
        std::chrono::steady_clock::now() - start >= std::chrono::milliseconds(timeout_ms)) {
      std::cerr << "error: node/" << node << " still runs " << d.running_ranks() << " ranks of "
                << Join(d.jobs()) << " after " << timeout_text
                << "; it stays cordoned (drain --force stops them)\n";
      return 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    resp = (*client)->Call(req);
    if (!resp.ok()) {
      std::cerr << "error: " << resp.status().message() << "\n";
      return 1;
    }
  }
}

}  // namespace trainlet::cli
