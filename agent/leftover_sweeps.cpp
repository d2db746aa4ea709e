#include "agent/leftover_sweeps.h"

namespace trainlet::agent {

void LeftoverSweeps::Ended(const std::string& job, uint32_t attempt, Clock::time_point now) {
  waiting_.emplace(std::make_pair(job, attempt), now);  // an earlier end keeps its time
}

std::optional<LeftoverSweeps::Clock::time_point> LeftoverSweeps::Run(Clock::time_point now) {
  std::optional<Clock::time_point> next;
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    const auto& [job, attempt] = it->first;
    const Leftovers left = leftovers_(job, attempt);
    const Clock::time_point deadline = it->second + patience_;
    if (left == Leftovers::kWinding && now < deadline) {
      next = next ? std::min(*next, deadline) : deadline;
      ++it;
      continue;
    }
    if (left != Leftovers::kContained) sweep_(job, attempt);
    it = waiting_.erase(it);
  }
  return next;
}

bool LeftoverSweeps::Waiting(const std::string& job) const {
  const auto it = waiting_.lower_bound({job, 0});
  return it != waiting_.end() && it->first.first == job;
}

}  // namespace trainlet::agent
