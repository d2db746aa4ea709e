#include "common/logging.h"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

namespace trainlet {

void SetUpLogging(const std::string& component, const std::string& level) {
  auto logger = spdlog::stderr_logger_mt(component);
  logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ " + component + ": %v");
  spdlog::set_default_logger(logger);
  auto lvl = spdlog::level::from_str(level);
  spdlog::set_level(lvl == spdlog::level::off && level != "off" ? spdlog::level::info : lvl);
  spdlog::flush_on(spdlog::level::info);
}

}  // namespace trainlet
