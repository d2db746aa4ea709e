// EtcdLeaderCampaign: a coordinator's campaign for leadership (EtcdLeaderElection) run on a
// thread of its own, so the coordinator's loop never waits for etcd to learn who leads. The
// thread renews the lease and reads the leader every `poll_interval` (and at once after a
// failed request, after `retry_interval`); the loop reads the latest result with View, which
// takes a mutex for a copy and never blocks on etcd.
//
// Stepping down: View ages the result by the caller's clock. Once `ttl` has passed since the
// lease was last renewed (measured from before the renewal was sent, so before etcd's own count
// ends), View says "not the leader", whether the thread is stuck in a request, etcd is gone, or
// the whole process was stopped. The leader's fence (its campaign key's create revision) is what
// makes that safe even when the loop acts late: a write after the key is gone fails in etcd.
//
// The identity a campaign publishes is the coordinator's advertised endpoints, as JSON
// ({"name", "operator", "agent"}), so a follower can tell clients where the leader is.
//
// Threading: Start, View, Resign and the destructor may be called from any one thread (the
// loop's); the campaign's own thread touches only the election and its client.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "common/status.h"
#include "coordinator/etcd_client.h"
#include "coordinator/etcd_leader_election.h"

namespace trainlet::coordinator {

// Where a coordinator serves, as it publishes it in its campaign key.
struct LeaderIdentity {
  std::string name;  // host:pid, for logs
  std::string operator_endpoint;
  std::string agent_endpoint;

  std::string ToJson() const;
  // An identity that is not this JSON (another version's) parses to name = the raw value.
  static LeaderIdentity FromJson(const std::string& value);
};

class EtcdLeaderCampaign {
 public:
  using Clock = std::chrono::steady_clock;

  struct Options {
    EtcdClientConfig client;      // the campaign's own connections (not the store's)
    std::string election_prefix;  // ends with '/'
    LeaderIdentity identity;
    std::chrono::seconds ttl{3};
    // Renewals while leading come every ttl/3; a follower polls this often, so it takes over
    // soon after the leader's lease ends.
    std::chrono::milliseconds follower_poll{250};
  };

  // What the loop sees.
  struct View {
    bool leader = false;
    std::optional<LeaderIdentity> leader_identity;  // nullopt while none is known
    std::optional<EtcdCompare> fence;               // this campaign's, while it has a key
    std::string error;                              // the last request's error, "" when it worked
  };

  // Checks the client config and starts the thread; the first campaign happens on it.
  static Result<std::unique_ptr<EtcdLeaderCampaign>> Start(Options options);
  // Stops the thread (waiting at most for the request in flight) without resigning.
  ~EtcdLeaderCampaign();
  EtcdLeaderCampaign(const EtcdLeaderCampaign&) = delete;
  EtcdLeaderCampaign& operator=(const EtcdLeaderCampaign&) = delete;

  View view(Clock::time_point now) const;
  // Stops the thread and revokes the lease, so a successor leads at once (a clean shutdown).
  Status Resign();
  std::chrono::seconds ttl() const { return options_.ttl; }

 private:
  EtcdLeaderCampaign(Options options, std::unique_ptr<EtcdClient> client);
  void Run();
  void StopThread();

  // Constant after construction.
  const Options options_;
  std::unique_ptr<EtcdClient> client_;  // used by the thread only (and Resign, after it)
  std::unique_ptr<EtcdLeaderElection> election_;

  // Guarded by mu_.
  mutable std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;
  bool leader_ = false;  // as of the last successful Poll
  std::optional<LeaderIdentity> leader_identity_;
  std::optional<EtcdCompare> fence_;
  Clock::time_point renewed_{};  // when the lease was last renewed (sent)
  std::string error_;

  std::thread thread_;
};

}  // namespace trainlet::coordinator
