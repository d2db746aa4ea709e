#include "coordinator/missed_purges.h"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace trainlet::coordinator {

void MissedPurges::Purge(const std::string& job, const std::string& uid,
                         const std::vector<std::string>& ran, int64_t now_ms, bool shared) {
  Expire(now_ms);
  std::vector<std::string> sorted = ran;
  std::sort(sorted.begin(), sorted.end());
  bool shared_left = shared;  // no node owns the shared dir's purge yet
  for (const std::string& node : sorted) {
    const NodeEntry* e = nodes_->Find(node);
    if (e != nullptr && e->state != NodeState::kLost) {
      agents_->PurgeJob(node, job, uid, shared_left);
      shared_left = false;
      continue;
    }
    spdlog::info("trainjob/{}: node {} is away; its data there goes when it registers", job, node);
    missed_[{node, job}] = Missed{uid, now_ms, false};
  }
  if (shared_left) {
    // Every node that ran it is away: whichever registers first owns the shared purge.
    for (const std::string& node : sorted) {
      auto it = missed_.find({node, job});
      if (it != missed_.end()) it->second.shared = true;
    }
  }
  while (missed_.size() > kMaxEntries) {  // the oldest delete goes first
    auto oldest =
        std::min_element(missed_.begin(), missed_.end(), [](const auto& a, const auto& b) {
          return a.second.deleted_unix_ms < b.second.deleted_unix_ms;
        });
    missed_.erase(oldest);
  }
}

std::vector<std::string> MissedPurges::OnRegistered(const std::string& node, int64_t now_ms) {
  Expire(now_ms);
  std::vector<std::string> jobs;
  auto it = missed_.lower_bound({node, ""});
  while (it != missed_.end() && it->first.first == node) {
    const std::string job = it->first.second;
    const bool shared = it->second.shared;
    jobs.push_back(job);
    agents_->PurgeJob(node, job, it->second.uid, shared);
    it = missed_.erase(it);
    if (!shared) continue;
    for (auto& [key, other] : missed_) {  // exactly once: the others no longer own it
      if (key.second == job) other.shared = false;
    }
  }
  if (!jobs.empty()) {
    spdlog::info("node {} registered: purging the data of {} job(s) deleted while it was away",
                 node, jobs.size());
  }
  return jobs;
}

void MissedPurges::Expire(int64_t now_ms) {
  std::erase_if(missed_,
                [&](const auto& kv) { return now_ms - kv.second.deleted_unix_ms > kRetentionMs; });
}

}  // namespace trainlet::coordinator
