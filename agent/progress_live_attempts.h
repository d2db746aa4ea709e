// ProgressLiveAttempts: the attempts that may report progress on this node now (each job's latest
// attempt while it launches or runs here) and how many of its ranks have started, as the agent's
// loop last published them. The progress endpoint's thread reads it for every post
// (ProgressEndpoint::Options::live_ranks): the node's attempt table and supervisor belong to the
// loop and may not be read from there.
//
// The loop publishes after every change it makes (Agent::PublishLiveAttempts at each loop turn's
// tick, and before forgetting an ended attempt), so a post sees the table of the loop's last turn.
//
// Threads: Publish from one thread (the loop); Find from any. One mutex, held only to swap or look
// up.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

namespace trainlet::agent {

class ProgressLiveAttempts {
 public:
  struct Live {
    uint32_t attempt = 0;
    size_t ranks = 0;  // started (not held) ranks of the attempt on this node
    bool operator==(const Live&) const = default;
  };
  using Table = std::map<std::string, Live, std::less<>>;  // by job: one live attempt each

  // Replaces the table; takes the lock only when it differs from the one published last.
  // Returns whether it did. The publishing thread only.
  bool Publish(Table live);
  // The started ranks of (job, attempt), or nullopt when that attempt may not report here.
  std::optional<size_t> Find(std::string_view job, uint32_t attempt) const;

 private:
  mutable std::mutex mu_;
  Table live_;  // written under mu_ by the publishing thread, which may read it without
};

}  // namespace trainlet::agent
