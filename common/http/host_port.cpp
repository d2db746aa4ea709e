// SplitHostPort (declared in http_server.h), apart from httplib: the agent's own HTTP server
// parses its metrics address with it too, without linking httplib.
#include <string>
#include <utility>

#include "common/http/http_server.h"

namespace trainlet {

Result<std::pair<std::string, uint16_t>> SplitHostPort(const std::string& address) {
  const auto colon = address.rfind(':');
  if (colon == std::string::npos) {
    return InvalidError("address \"" + address + "\": expected host:port");
  }
  std::string host = address.substr(0, colon);
  const std::string port = address.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != port.npos ||
      std::stoul(port) > 65535) {
    return InvalidError("address \"" + address + "\": the port must be a number from 0 to 65535");
  }
  return std::make_pair(host, static_cast<uint16_t>(std::stoul(port)));
}

}  // namespace trainlet
