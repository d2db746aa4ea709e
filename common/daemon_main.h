// What the two daemons' main() functions share: the keys every daemon has (metrics address,
// log level and target), the steps after flag parsing (check the config, --print-config, set up
// logging), and running the daemon with its errors printed.
#pragma once

#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "common/daemon_config.h"
#include "common/logging.h"
#include "common/status.h"

namespace trainlet {

struct CommonDaemonKeys {
  std::string metrics_address;
  bool metrics_best_effort = false;  // the address was left at its default: a busy port only warns
  std::string log_level = "info";
  std::string log_target = "auto";
};

// Declares metrics_address, log_level and log_target. `keys.metrics_address` holds the default.
void AddCommonDaemonKeys(DaemonConfig& c, CommonDaemonKeys* keys);

// After CLI11 has parsed the flags: checks the config and handles --print-config, then sets up
// logging for `component`. Returns an exit code when the process should exit now.
std::optional<int> FinishDaemonConfig(DaemonConfig& c, CommonDaemonKeys* keys,
                                      const char* component);

// Runs a daemon built by Create(), printing "<program>: <error>" on failure. Returns the exit code.
template <typename Daemon>
int RunDaemon(const char* program, Result<std::unique_ptr<Daemon>> daemon) {
  if (!daemon.ok()) {
    std::fprintf(stderr, "%s: %s\n", program, daemon.status().message().c_str());
    return 1;
  }
  const Status st = (*daemon)->Run();
  if (!st.ok()) {
    std::fprintf(stderr, "%s: %s\n", program, st.message().c_str());
    return 1;
  }
  return 0;
}

}  // namespace trainlet
