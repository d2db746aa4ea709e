#include "coordinator/log_target.h"

#include <algorithm>
#include <climits>

#include "coordinator/attempt_steps.h"
#include "coordinator/rank_state_machine.h"

namespace trainlet::coordinator {
namespace {

const v1::AttemptRecord* RecordOf(const v1::JobStatus& st, uint32_t attempt) {
  for (const auto& a : st.attempts()) {
    if (a.attempt() == attempt) return &a;
  }
  return nullptr;
}

std::string Range(uint32_t n) { return n == 0 ? "none" : "0-" + std::to_string(n - 1); }

// How many workers step `step` had in `attempt` ("" when it cannot be told), for a refusal.
std::string WorkersOf(const v1::JobStatus& st, const std::string& step, uint32_t attempt) {
  for (const auto& s : st.attempt_steps()) {
    if (s.attempt() == attempt && s.step() == step) return Range(s.count());
  }
  uint32_t n = 0;
  for (const auto& r : st.ranks()) n += r.step() == step ? 1 : 0;
  return Range(n);
}

}  // namespace

std::optional<uint32_t> AttemptStepWorkerRank(const v1::JobStatus& st, const std::string& step,
                                              uint32_t index, uint32_t attempt) {
  if (attempt == 0 || attempt == st.attempt()) return StepWorkerRank(st, step, index);
  bool recorded = false;
  uint32_t main_world = UINT32_MAX;  // the first step worker's rank is the main world's size
  for (const auto& s : st.attempt_steps()) {
    if (s.attempt() != attempt) continue;
    recorded = true;
    main_world = std::min(main_world, s.first_rank());
    if (s.step() == step && !step.empty()) {
      return index < s.count() ? std::optional<uint32_t>(s.first_rank() + index) : std::nullopt;
    }
  }
  if (recorded) {
    return step.empty() && index < main_world ? std::optional<uint32_t>(index) : std::nullopt;
  }
  // Nothing recorded: a job without steps (its main ranks are every rank), or an attempt placed
  // before attempt_steps existed, read with the current attempt's numbering.
  const bool has_steps = std::any_of(st.ranks().begin(), st.ranks().end(),
                                     [](const auto& r) { return !r.step().empty(); });
  if (!has_steps) return step.empty() ? std::optional<uint32_t>(index) : std::nullopt;
  return StepWorkerRank(st, step, index);
}

std::string AttemptNumbers(const v1::JobStatus& st) {
  std::vector<uint32_t> n;
  for (const auto& a : st.attempts()) n.push_back(a.attempt());
  std::sort(n.begin(), n.end());
  n.erase(std::unique(n.begin(), n.end()), n.end());
  if (n.empty()) return "none";
  if (n.back() - n.front() + 1 == n.size()) {
    return n.size() == 1 ? std::to_string(n[0])
                         : std::to_string(n.front()) + "-" + std::to_string(n.back());
  }
  std::string out;
  for (uint32_t a : n) out += (out.empty() ? "" : ", ") + std::to_string(a);
  return out;
}

Result<LogTarget> ResolveLogTarget(const v1::JobStatus& st, const v1::LogsRequest& req,
                                   const std::string& shown) {
  LogTarget t;
  t.attempt = req.attempt() != 0 ? req.attempt() : st.attempt();
  const bool current = t.attempt == st.attempt();
  const v1::AttemptRecord* rec = RecordOf(st, t.attempt);
  if (!current && rec == nullptr) {
    return NotFoundError("--attempt " + std::to_string(t.attempt) + ": trainjob/" + shown +
                         " has attempts " + AttemptNumbers(st));
  }
  const std::string in = current ? "" : " (attempt " + std::to_string(t.attempt) + ")";
  uint32_t global = req.rank();
  if (!req.step().empty()) {
    const auto found = AttemptStepWorkerRank(st, req.step(), req.rank(), t.attempt);
    if (!found) {
      return NotFoundError("--step " + req.step() + " --rank " + std::to_string(req.rank()) + in +
                           ": trainjob/" + shown + " has no such worker of that replicated job " +
                           "(its workers: " + WorkersOf(st, req.step(), t.attempt) + ")");
    }
    global = *found;
  }
  if (current) {
    const v1::RankStatus* rank = nullptr;
    for (const auto& r : st.ranks()) {
      if (r.rank() == global) rank = &r;
    }
    if (rank == nullptr) {
      return NotFoundError("--rank " + std::to_string(req.rank()) + ": trainjob/" + shown +
                           " has ranks " + Range(static_cast<uint32_t>(st.ranks_size())));
    }
    t.node = rank->node();
    t.done = !IsRankActive(rank->rank_state());
  } else {
    // An earlier attempt's log is where that attempt ran, which may not be where it runs now.
    if (global >= static_cast<uint32_t>(rec->rank_nodes_size())) {
      return NotFoundError("--rank " + std::to_string(req.rank()) + in + ": trainjob/" + shown +
                           " has ranks " + Range(static_cast<uint32_t>(rec->rank_nodes_size())));
    }
    t.node = rec->rank_nodes(static_cast<int>(global));
    t.done = true;
  }
  t.rank = global;
  return t;
}

}  // namespace trainlet::coordinator
