#include "common/daemon_main.h"

namespace trainlet {

void AddCommonDaemonKeys(DaemonConfig& c, CommonDaemonKeys* keys) {
  c.String("metrics_address", &keys->metrics_address,
           "host:port serving /metrics, /healthz and /readyz; \"\" turns it off", false,
           DaemonConfig::CheckListenAddress);
  c.Enum("log_level", &keys->log_level, {"trace", "debug", "info", "warn", "error"},
         "trace, debug, info, warn or error");
  c.Enum("log_target", &keys->log_target, {"auto", "stderr", "journal"},
         "auto (the journal under systemd), stderr or journal");
}

std::optional<int> FinishDaemonConfig(DaemonConfig& c, CommonDaemonKeys* keys,
                                      const char* component) {
  if (Status s = c.Finish(); !s.ok()) {
    std::fprintf(stderr, "%s: %s\n", c.daemon().c_str(), s.message().c_str());
    return 2;
  }
  if (c.print_requested()) {
    std::fputs(c.ToYaml().c_str(), stdout);
    return 0;
  }
  keys->metrics_best_effort = !c.WasSet("metrics_address");
  SetUpLogging(component, keys->log_level, *ParseLogTarget(keys->log_target));
  return std::nullopt;
}

}  // namespace trainlet
