#include "coordinator/missed_purges.h"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace trainlet::coordinator {

void MissedPurges::Purge(const std::string& job, const std::string& uid,
                         const std::vector<std::string>& ran, int64_t now_ms) {
  Expire(now_ms);
  for (const std::string& node : ran) {
    const NodeEntry* e = nodes_->Find(node);
    if (e != nullptr && e->state != NodeState::kLost) {
      agents_->PurgeJob(node, job, uid);
      continue;
    }
    spdlog::info("trainjob/{}: node {} is away; its data there goes when it registers", job, node);
    missed_[{node, job}] = Missed{uid, now_ms};
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
    jobs.push_back(it->first.second);
    agents_->PurgeJob(node, it->first.second, it->second.uid);
    it = missed_.erase(it);
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
