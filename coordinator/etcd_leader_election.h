// EtcdLeaderElection: one coordinator's campaign for leadership, as etcd's election API
// (clientv3/concurrency.Election) does it:
//   - a lease of `ttl` seconds, kept alive by Poll;
//   - a campaign key <election_prefix><lease id, hex> = identity, attached to the lease and
//     created only if absent;
//   - the leader is the campaign key with the lowest create revision under the prefix. The
//     others wait behind it; when its lease ends (a crash, a partition, a pause longer than the
//     TTL) etcd deletes its key and the next one leads.
// Fence() is the compare EtcdJobStore::SetWriteFence takes: "my campaign key still exists with
// the create revision it got". A leader whose lease ended fails that compare, so none of its
// writes land after its key is gone, whatever its own clock or state believes.
//
// The coordinator runs it on a thread of its own (EtcdLeaderCampaign, etcd_leader_campaign.h).
//
// Threading: one thread (the loop). Poll blocks for up to three etcd round trips.
// Errors: Poll returns EtcdClient's errors (kUnavailable "no quorum" / "unreachable"); the state
// it last returned stays as it was, and `leader` turns false by itself once `ttl` has passed
// since the lease was last renewed (stepping down within the lease TTL, as the issue asks).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "common/status.h"
#include "coordinator/etcd_client.h"

namespace trainlet::coordinator {

class EtcdLeaderElection {
 public:
  using Clock = std::chrono::steady_clock;

  struct State {
    bool leader = false;          // this campaign holds the lowest key and its lease is live
    std::string leader_identity;  // the leader's identity ("" when none is known)
  };

  // `client` must outlive this object. `election_prefix` ends with '/'.
  EtcdLeaderElection(EtcdClient& client, std::string election_prefix, std::string identity,
                     std::chrono::seconds ttl);

  // Renews the lease (or, without one, grants one and creates the campaign key), then reads who
  // leads. Call it about every ttl/3.
  Result<State> Poll(Clock::time_point now);
  // The state as of the last successful Poll, aged by `now`: not the leader once ttl has passed
  // since the last renewal.
  State state(Clock::time_point now) const;
  // The compare to fence writes with; nullopt without a campaign key.
  std::optional<EtcdCompare> Fence() const;
  // Ends the campaign: revokes the lease, which deletes the key (a successor leads at once).
  Status Resign();

  const std::string& campaign_key() const { return key_; }
  // When the lease was last granted or renewed (the `now` of that Poll); {} without a lease.
  Clock::time_point renewed() const { return lease_ == 0 ? Clock::time_point{} : renewed_; }

 private:
  Status Campaign(Clock::time_point now);

  // Constant after construction.
  EtcdClient& client_;
  const std::string prefix_;
  const std::string identity_;
  const std::chrono::seconds ttl_;

  int64_t lease_ = 0;            // 0: none
  std::string key_;              // the campaign key, "" without a lease
  int64_t create_revision_ = 0;  // of key_
  Clock::time_point renewed_{};  // when the lease was last granted or renewed
  State last_;
};

}  // namespace trainlet::coordinator
