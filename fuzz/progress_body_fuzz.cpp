// libFuzzer target for what a rank sends the agent's progress endpoint (agent/progress_body.h,
// agent/progress_token.h): any bytes as a body, and as a bearer token, must give a value or an
// error, never a crash, a hang or an uncaught exception; whatever is accepted must be within
// Kubeflow's limits, since the agent forwards it as is; and the body's two readers (the JSON subset
// scanner, nlohmann's parser) must agree.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "agent/progress_body.h"
#include "agent/progress_token.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto parsed = trainlet::agent::ParseProgressBody(text);
  if (parsed.ok() && parsed->has_value()) {
    const auto& s = **parsed;
    if (s.has_progress_percentage() &&
        (s.progress_percentage() < 0 || s.progress_percentage() > 100)) {
      __builtin_trap();
    }
    if (s.has_estimated_remaining_seconds() && s.estimated_remaining_seconds() < 0) {
      __builtin_trap();
    }
    if (s.metrics_size() > static_cast<int>(trainlet::agent::kMaxProgressMetrics)) __builtin_trap();
    for (const auto& m : s.metrics()) {
      if (m.name().empty() || m.name().size() > trainlet::agent::kMaxMetricTextBytes ||
          m.value().empty() || m.value().size() > trainlet::agent::kMaxMetricTextBytes) {
        __builtin_trap();
      }
    }
  }
  // The subset scanner (agent/json_subset_scanner.h) and nlohmann's parser give one result.
  auto full = trainlet::agent::ParseProgressBody(
      text, trainlet::agent::ProgressJsonParser::kFullParserOnly);
  if (parsed.ok() != full.ok()) __builtin_trap();
  if (!parsed.ok() && parsed.status().message() != full.status().message()) __builtin_trap();
  if (parsed.ok() &&
      (parsed->has_value() != full->has_value() ||
       (parsed->has_value() && (*parsed)->SerializeAsString() != (*full)->SerializeAsString()))) {
    __builtin_trap();
  }
  (void)trainlet::agent::ParseRfc3339Ms(text);
  static const trainlet::agent::ProgressTokens tokens(std::string(32, 's'));
  auto claim = tokens.Verify(std::string(text));
  // Only a token this secret made verifies, and it says what it was made for.
  if (claim.ok() && tokens.Issue(claim->job, claim->attempt) != text) __builtin_trap();
  return 0;
}
