#include "coordinator/missed_purges.h"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace trainlet::coordinator {

PurgeTombstone MissedPurges::Tombstone(const Key& key, const Missed& m) {
  return PurgeTombstone{key.first, key.second, m.uid, m.deleted_unix_ms, m.shared};
}

Status MissedPurges::Load() {
  if (store_ == nullptr) return Status::Ok();
  TRAINLET_ASSIGN_OR_RETURN(auto values, store_->ListClusterValues(kPurgeTombstonePrefix));
  for (const auto& [key, value] : values) {
    auto t = DecodePurgeTombstone(key, value);
    if (!t.ok()) {
      spdlog::warn("{}: dropping it: {}", store_->location(), t.status().message());
      (void)store_->DeleteClusterValue(key);
      continue;
    }
    missed_[{t->node, t->job}] = Missed{t->uid, t->deleted_unix_ms, t->shared};
  }
  if (!missed_.empty()) {
    spdlog::info("{} purge(s) of deleted jobs wait for their nodes to register", missed_.size());
  }
  return Status::Ok();
}

Status MissedPurges::Purge(const std::string& job, const std::string& uid,
                           const std::vector<std::string>& ran, int64_t now_ms, bool shared) {
  Expire(now_ms);
  std::vector<std::string> sorted = ran;
  std::sort(sorted.begin(), sorted.end());
  std::vector<std::string> present;
  std::vector<PurgeTombstone> away;
  for (const std::string& node : sorted) {
    const NodeEntry* e = nodes_->Find(node);
    if (e != nullptr && e->state != NodeState::kLost) {
      present.push_back(node);
    } else {
      away.push_back(PurgeTombstone{node, job, uid, now_ms, false});
    }
  }
  // Every node that ran it is away: whichever registers first owns the shared purge.
  if (shared && present.empty()) {
    for (PurgeTombstone& t : away) t.shared = true;
  }
  if (store_ != nullptr) {  // stored before anything is sent: the caller may try again
    for (const PurgeTombstone& t : away) {
      TRAINLET_RETURN_IF_ERROR(store_->PutClusterValue(t.Key(), t.Value()));
    }
  }
  for (const PurgeTombstone& t : away) {
    spdlog::info("trainjob/{}: node {} is away; its data there goes when it registers", job,
                 t.node);
    missed_[{t.node, job}] = Missed{uid, now_ms, t.shared};
  }
  for (size_t i = 0; i < present.size(); ++i) {
    agents_->PurgeJob(present[i], job, uid, shared && i == 0);
  }
  while (missed_.size() > kMaxEntries) {  // the oldest delete goes first
    auto oldest =
        std::min_element(missed_.begin(), missed_.end(), [](const auto& a, const auto& b) {
          return a.second.deleted_unix_ms < b.second.deleted_unix_ms;
        });
    spdlog::warn("more than {} missed purges: forgetting trainjob/{}'s on node {}", kMaxEntries,
                 oldest->first.second, oldest->first.first);
    Forget(oldest->first);
  }
  return Status::Ok();
}

std::vector<std::string> MissedPurges::OnRegistered(
    const std::string& node, int64_t now_ms,
    const std::function<bool(const std::string&)>& exists) {
  Expire(now_ms);
  std::vector<std::string> jobs;
  auto it = missed_.lower_bound({node, ""});
  while (it != missed_.end() && it->first.first == node) {
    const Key key = it->first;
    const Missed m = it->second;
    ++it;
    Forget(key);  // `it` stays valid: only `key` is erased
    if (m.uid.empty() && exists && exists(key.second)) {
      spdlog::warn(
          "trainjob/{} was applied again: not purging node {} of an older one without "
          "a UID",
          key.second, node);
      continue;
    }
    jobs.push_back(key.second);
    agents_->PurgeJob(node, key.second, m.uid, m.shared);
    if (!m.shared) continue;
    for (auto& [other_key, other] : missed_) {  // exactly once: the others no longer own it
      if (other_key.second != key.second || !other.shared) continue;
      other.shared = false;
      Rewrite(Tombstone(other_key, other));
    }
  }
  if (!jobs.empty()) {
    spdlog::info("node {} registered: purging the data of {} job(s) deleted while it was away",
                 node, jobs.size());
  }
  return jobs;
}

void MissedPurges::Expire(int64_t now_ms) {
  std::vector<Key> old;
  for (const auto& [key, m] : missed_) {
    if (now_ms - m.deleted_unix_ms > kRetentionMs) old.push_back(key);
  }
  for (const Key& key : old) Forget(key);
}

void MissedPurges::Forget(const Key& key) {
  missed_.erase(key);
  if (store_ == nullptr) return;
  const std::string stored = PurgeTombstone{key.first, key.second, "", 0, false}.Key();
  if (Status s = store_->DeleteClusterValue(stored); !s.ok()) {
    spdlog::warn("{}: cannot remove {}: {}", store_->location(), stored, s.message());
  }
}

void MissedPurges::Rewrite(const PurgeTombstone& t) {
  if (store_ == nullptr) return;
  if (Status s = store_->PutClusterValue(t.Key(), t.Value()); !s.ok()) {
    spdlog::warn("{}: cannot rewrite {}: {}", store_->location(), t.Key(), s.message());
  }
}

}  // namespace trainlet::coordinator
