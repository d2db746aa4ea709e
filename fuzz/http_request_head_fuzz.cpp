// libFuzzer target for the request heads the agent's progress port parses (agent/
// http_request_head.h): any bytes must give a head or an error response, never a crash, a hang or
// an uncaught exception; an accepted head's body length is within the 18 digits it allows, and a
// refusal carries a 4xx status and says why.

#include <cstddef>
#include <cstdint>
#include <string>

#include "agent/http_request_head.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const auto h = trainlet::agent::ParseHttpRequestHead(text);
  if (h.error) {
    if (h.error->status < 400 || h.error->status > 499 || h.error->body.empty()) __builtin_trap();
  } else if (h.content_length > 999999999999999999ull) {
    __builtin_trap();
  }
  return 0;
}
