#include "agent/step/step_stop.h"

#include <nlohmann/json.hpp>

#include "agent/step/private_file.h"

namespace trainlet::step {
namespace {

using json = nlohmann::json;

// The largest signal number any platform trainlet runs on has (Linux's SIGRTMAX is 64).
constexpr int kMaxSignal = 64;

}  // namespace

std::string EncodeStopRequest(const StopRequest& request) {
  json doc = {{"warning_signal", request.warning_signal},
              {"warning_grace_ms", request.warning_grace_ms},
              {"sent_unix_ms", request.sent_unix_ms}};
  return doc.dump() + "\n";
}

Result<StopRequest> DecodeStopRequest(const std::string& text) {
  const json doc = json::parse(text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) return InvalidError("not a JSON object");
  StopRequest out;
  auto field = [&](const char* key) -> Result<int64_t> {
    auto it = doc.find(key);
    if (it == doc.end() || !it->is_number_integer()) {
      return InvalidError(std::string(key) + ": missing or not an integer");
    }
    return it->get<int64_t>();
  };
  TRAINLET_ASSIGN_OR_RETURN(const int64_t signal, field("warning_signal"));
  if (signal < 0 || signal > kMaxSignal) {
    return InvalidError("warning_signal: " + std::to_string(signal) + " is not a signal");
  }
  TRAINLET_ASSIGN_OR_RETURN(const int64_t grace, field("warning_grace_ms"));
  if (grace < 0 || grace > UINT32_MAX) return InvalidError("warning_grace_ms: out of range");
  TRAINLET_ASSIGN_OR_RETURN(out.sent_unix_ms, field("sent_unix_ms"));
  out.warning_signal = static_cast<int>(signal);
  out.warning_grace_ms = static_cast<uint32_t>(grace);
  return out;
}

Status WriteStopRequest(const std::string& path, const StopRequest& request) {
  return ReplaceFile(path, EncodeStopRequest(request), "stop request");
}

Result<StopRequest> ReadStopRequest(const std::string& path) {
  TRAINLET_ASSIGN_OR_RETURN(std::string text, ReadPrivateFile(path, 4096, "stop request"));
  auto request = DecodeStopRequest(text);
  if (!request.ok())
    return InvalidError("stop request " + path + ": " + request.status().message());
  return request;
}

}  // namespace trainlet::step
