#include "trainletctl/log_workers.h"

#include <algorithm>
#include <map>

namespace trainlet::cli {
namespace {

const v1::AttemptRecord* RecordOf(const v1::JobStatus& job, uint32_t attempt) {
  for (const auto& a : job.attempts()) {
    if (a.attempt() == attempt) return &a;
  }
  return nullptr;
}

// (rank, step) of every worker of an earlier attempt whose steps were recorded; empty when not.
std::vector<std::pair<uint32_t, std::string>> RecordedWorkers(const v1::JobStatus& job,
                                                              uint32_t attempt) {
  const v1::AttemptRecord* rec = RecordOf(job, attempt);
  std::vector<std::pair<uint32_t, std::string>> out;
  if (rec == nullptr || attempt == job.attempt()) return out;
  std::map<uint32_t, std::string> step_of;
  bool recorded = false;
  for (const auto& s : job.attempt_steps()) {
    if (s.attempt() != attempt) continue;
    recorded = true;
    for (uint32_t i = 0; i < s.count(); ++i) step_of[s.first_rank() + i] = s.step();
  }
  const bool has_steps = std::any_of(job.ranks().begin(), job.ranks().end(),
                                     [](const auto& r) { return !r.step().empty(); });
  if (!recorded && has_steps) return out;  // numbered as the current attempt: read from it
  for (uint32_t r = 0; r < static_cast<uint32_t>(rec->rank_nodes_size()); ++r) {
    auto it = step_of.find(r);
    out.emplace_back(r, it == step_of.end() ? "" : it->second);
  }
  return out;
}

}  // namespace

Result<std::vector<LogWorker>> LogWorkers(const v1::JobStatus& job, uint32_t attempt,
                                          const std::string& step) {
  std::vector<std::pair<uint32_t, std::string>> workers = RecordedWorkers(job, attempt);
  if (workers.empty()) {
    for (const auto& r : job.ranks()) workers.emplace_back(r.rank(), r.step());
    std::sort(workers.begin(), workers.end());
  }
  std::vector<LogWorker> out;
  std::map<std::string, uint32_t> index;  // workers seen per step
  for (const auto& [rank, s] : workers) {
    if (!step.empty() && s != step) continue;
    out.push_back(
        {rank, s.empty() ? "rank " + std::to_string(rank) : s + " " + std::to_string(index[s]++)});
  }
  if (out.empty()) {
    return UnavailableError(
        "trainjob/" + job.name() +
        (step.empty() ? " has no ranks yet" : " has no workers of step " + step));
  }
  return out;
}

Result<uint32_t> PreviousAttempt(const v1::JobStatus& job, const std::string& shown) {
  if (job.attempt() <= 1) {
    return InvalidError("--previous: trainjob/" + shown + " has " +
                        (job.attempt() == 0 ? "not started yet" : "only attempt 1"));
  }
  return job.attempt() - 1;
}

}  // namespace trainlet::cli
