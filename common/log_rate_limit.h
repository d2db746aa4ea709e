// LogRateLimiter: keeps a warning that repeats (a refused registration, a refused handshake) to
// one line per key per interval, and counts what it held back so the next line can say so.
//
// Each key (a node name, a public key) logs its first occurrence at once; later ones within
// `interval` of the last written line are only counted. The next occurrence after the interval
// is written with the count ("and 37 more in the last 10.0 s"). Nothing is written by the
// limiter itself: the caller asks Admit and logs when told to.
//
// Memory is bounded: at most `max_keys` keys are remembered. When full, keys whose interval has
// passed are forgotten first; if none has, the new key shares one overflow entry, so a flood of
// distinct keys still gives at most one line per interval.
//
// Not thread-safe: owned by one loop. Time is passed in, so tests use a fake clock.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

namespace trainlet {

class LogRateLimiter {
 public:
  using Clock = std::chrono::steady_clock;

  // What to do with one occurrence.
  struct Decision {
    bool log = false;         // write the line now
    uint64_t suppressed = 0;  // when log: occurrences held back since the previous line
    Clock::duration since{};  // when log and suppressed > 0: time since the previous line
  };

  explicit LogRateLimiter(Clock::duration interval, size_t max_keys = 1024);

  // Records one occurrence of `key` at `now` and says whether to log it.
  Decision Admit(const std::string& key, Clock::time_point now);

  // " (and N more in the last X s)" when the decision held some back, else "": for the line.
  static std::string Suffix(const Decision& decision);

  size_t keys() const { return entries_.size(); }

 private:
  struct Entry {
    Clock::time_point last_logged{};
    uint64_t suppressed = 0;
  };
  void ForgetExpired(Clock::time_point now);

  // Constant after construction.
  Clock::duration interval_;
  size_t max_keys_;
  // Owned by the caller's loop.
  std::map<std::string, Entry> entries_;
};

}  // namespace trainlet
