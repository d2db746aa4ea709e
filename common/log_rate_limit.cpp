#include "common/log_rate_limit.h"

#include <cstdio>
#include <iterator>

namespace trainlet {

namespace {
// The shared entry of keys that found the table full; not a valid node name or Z85 key.
constexpr char kOverflowKey[] = "\x01overflow";
}  // namespace

LogRateLimiter::LogRateLimiter(Clock::duration interval, size_t max_keys)
    : interval_(interval), max_keys_(max_keys < 1 ? 1 : max_keys) {}

LogRateLimiter::Decision LogRateLimiter::Admit(const std::string& key, Clock::time_point now) {
  auto it = entries_.find(key);
  if (it == entries_.end()) {
    if (entries_.size() >= max_keys_) ForgetExpired(now);
    const bool full = entries_.size() >= max_keys_;
    it = full ? entries_.find(kOverflowKey) : entries_.end();
    if (it == entries_.end()) {
      // A new key (or the first overflow): written at once.
      entries_[full ? kOverflowKey : key] = Entry{now, 0};
      return Decision{true, 0, {}};
    }
  }
  Entry& e = it->second;
  if (now - e.last_logged < interval_) {
    ++e.suppressed;
    return Decision{};
  }
  Decision d{true, e.suppressed, now - e.last_logged};
  e = Entry{now, 0};
  return d;
}

std::string LogRateLimiter::Suffix(const Decision& decision) {
  if (!decision.log || decision.suppressed == 0) return "";
  const double seconds = std::chrono::duration<double>(decision.since).count();
  char buf[96];
  std::snprintf(buf, sizeof buf, " (and %llu more in the last %.1f s)",
                static_cast<unsigned long long>(decision.suppressed), seconds);
  return buf;
}

void LogRateLimiter::ForgetExpired(Clock::time_point now) {
  // An expired entry's held-back count is dropped with it: its next line is a first one again.
  for (auto it = entries_.begin(); it != entries_.end();) {
    it = now - it->second.last_logged >= interval_ ? entries_.erase(it) : std::next(it);
  }
}

}  // namespace trainlet
