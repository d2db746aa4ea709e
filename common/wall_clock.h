// Wall-clock time for records (event times, ages), as opposed to steady_clock for timeouts.
#pragma once

#include <chrono>
#include <cstdint>

namespace trainlet {

// Milliseconds since the Unix epoch.
inline int64_t NowUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace trainlet
