#include "coordinator/etcd_leader_election.h"

#include <cstdio>
#include <utility>

namespace trainlet::coordinator {

EtcdLeaderElection::EtcdLeaderElection(EtcdClient& client, std::string election_prefix,
                                       std::string identity, std::chrono::seconds ttl)
    : client_(client),
      prefix_(std::move(election_prefix)),
      identity_(std::move(identity)),
      ttl_(ttl) {}

Status EtcdLeaderElection::Campaign(Clock::time_point now) {
  TRAINLET_ASSIGN_OR_RETURN(int64_t lease, client_.LeaseGrant(ttl_.count()));
  char hex[32];
  std::snprintf(hex, sizeof(hex), "%llx", static_cast<unsigned long long>(lease));
  const std::string key = prefix_ + hex;
  EtcdCompare absent{key, EtcdCompare::Target::kCreate, EtcdCompare::Result::kEqual, 0, ""};
  TRAINLET_ASSIGN_OR_RETURN(
      EtcdTxnResult r,
      client_.Txn({absent}, {EtcdOp::Put(key, identity_, lease)}, {EtcdOp::Range(key)}));
  lease_ = lease;
  key_ = key;
  renewed_ = now;
  // Created now: its create revision is the txn's; else (a lease id reused) the stored one.
  create_revision_ = r.revision;
  if (!r.succeeded && !r.ranges.empty() && !r.ranges[0].empty()) {
    create_revision_ = r.ranges[0][0].create_revision;
  }
  return Status::Ok();
}

Result<EtcdLeaderElection::State> EtcdLeaderElection::Poll(Clock::time_point now) {
  if (lease_ != 0) {
    TRAINLET_ASSIGN_OR_RETURN(int64_t ttl_left, client_.LeaseKeepAlive(lease_));
    if (ttl_left > 0) {
      renewed_ = now;
    } else {  // expired: our key is gone; campaign again, behind whoever leads now
      lease_ = 0;
      key_.clear();
      create_revision_ = 0;
    }
  }
  if (lease_ == 0) TRAINLET_RETURN_IF_ERROR(Campaign(now));

  TRAINLET_ASSIGN_OR_RETURN(auto kvs, client_.Range(prefix_, EtcdClient::PrefixEnd(prefix_)));
  const EtcdKeyValue* first = nullptr;
  for (const auto& kv : kvs) {
    if (first == nullptr || kv.create_revision < first->create_revision) first = &kv;
  }
  State s;
  if (first != nullptr) {
    s.leader_identity = first->value;
    s.leader = first->key == key_ && first->create_revision == create_revision_;
  }
  last_ = s;
  return state(now);
}

EtcdLeaderElection::State EtcdLeaderElection::state(Clock::time_point now) const {
  State s = last_;
  // Past the TTL since the last renewal, etcd may have expired the lease: step down without
  // waiting to hear it.
  if (lease_ == 0 || now - renewed_ >= ttl_) s.leader = false;
  return s;
}

std::optional<EtcdCompare> EtcdLeaderElection::Fence() const {
  if (key_.empty()) return std::nullopt;
  return EtcdCompare{key_, EtcdCompare::Target::kCreate, EtcdCompare::Result::kEqual,
                     create_revision_, ""};
}

Status EtcdLeaderElection::Resign() {
  if (lease_ == 0) return Status::Ok();
  TRAINLET_RETURN_IF_ERROR(client_.LeaseRevoke(lease_));
  lease_ = 0;
  key_.clear();
  create_revision_ = 0;
  last_ = State{};
  return Status::Ok();
}

}  // namespace trainlet::coordinator
