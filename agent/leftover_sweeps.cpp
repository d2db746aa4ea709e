#include "agent/leftover_sweeps.h"

namespace trainlet::agent {

void LeftoverSweeps::Ended(const std::string& job, uint32_t attempt, Clock::time_point now) {
  waiting_[{job, attempt}].since = now;  // what its steps said before stays owed
}

std::optional<LeftoverSweeps::Clock::time_point> LeftoverSweeps::Run(Clock::time_point now) {
  std::optional<Clock::time_point> next;
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    const auto& [job, attempt] = it->first;
    Wait& wait = it->second;
    const Leftovers left = leftovers_(job, attempt);
    wait.owed = wait.owed || left.uncontained;
    if (left.running) {  // its ranks run again: their end calls Ended once more
      ++it;
      continue;
    }
    const Clock::time_point deadline = wait.since + patience_;
    if (left.winding && now < deadline) {
      next = next ? std::min(*next, deadline) : deadline;
      ++it;
      continue;
    }
    if (wait.owed || left.winding) sweep_(job, attempt);
    it = waiting_.erase(it);
  }
  return next;
}

bool LeftoverSweeps::Waiting(const std::string& job) const {
  const auto it = waiting_.lower_bound({job, 0});
  return it != waiting_.end() && it->first.first == job;
}

}  // namespace trainlet::agent
