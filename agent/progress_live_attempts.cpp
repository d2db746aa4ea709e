#include "agent/progress_live_attempts.h"

#include <utility>

namespace trainlet::agent {

bool ProgressLiveAttempts::Publish(Table live) {
  if (live == live_) return false;  // no lock: only this thread writes live_
  std::lock_guard lock(mu_);
  live_.swap(live);
  return true;  // the old table is freed here, outside the lock
}

std::optional<size_t> ProgressLiveAttempts::Find(std::string_view job, uint32_t attempt) const {
  std::lock_guard lock(mu_);
  const auto it = live_.find(job);
  if (it == live_.end() || it->second.attempt != attempt) return std::nullopt;
  return it->second.ranks;
}

}  // namespace trainlet::agent
