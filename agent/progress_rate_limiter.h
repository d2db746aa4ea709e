// ProgressRateLimiter: a token bucket per job, so one job's ranks posting in a tight loop cost
// this agent (and the coordinator) a bounded amount, and other jobs are not starved.
//
// A job may post `per_rank_per_second` times a second for each of its ranks on this node, with a
// burst of two seconds' worth; a post over that is refused (429) and costs nothing. Kubeflow's
// SDK posts at most every 5 s per rank, Hugging Face's callback on its logging steps, the issue's
// benchmark every 100 ms: all well inside the default of 20 per rank per second.
//
// Time is passed in (the loop's monotonic clock), so tests drive it. Owned by the loop.
#pragma once

#include <chrono>
#include <map>
#include <string>

namespace trainlet::agent {

class ProgressRateLimiter {
 public:
  using Clock = std::chrono::steady_clock;
  explicit ProgressRateLimiter(double per_rank_per_second = 20) : rate_(per_rank_per_second) {}

  // Takes one post of `job`, which has `ranks` ranks here (0 counts as 1); false when over.
  bool Allow(const std::string& job, size_t ranks, Clock::time_point now);
  // Forgets a job (its attempts ended here); a forgotten job starts with a full bucket.
  void Forget(const std::string& job) { buckets_.erase(job); }
  size_t size() const { return buckets_.size(); }

 private:
  struct Bucket {
    double tokens = 0;
    Clock::time_point last;
  };
  double rate_;
  std::map<std::string, Bucket> buckets_;
};

}  // namespace trainlet::agent
