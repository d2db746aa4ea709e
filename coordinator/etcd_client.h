// EtcdClient: the part of etcd's v3 API trainlet uses (range, txn, leases), spoken over etcd's
// JSON gateway (`POST /v3/kv/range`, `/v3/kv/txn`, `/v3/lease/...`; keys and values base64) with
// cpp-httplib, plain HTTP or TLS with a client certificate. docs/operations.md says why the
// gateway and not gRPC++.
//
// Endpoints: tried in order, starting with the last one that answered. A request moves on to the
// next endpoint when it could not be sent (connection refused, TLS failure) or when the member
// answers that it has no leader, which it says before it proposes anything, so the move cannot
// apply a write twice. Every request carries `hasleader` metadata, so a member cut off from
// its quorum refuses at once instead of waiting for its own timeout.
//
// Threading: one thread at a time (the coordinator's loop). Each call blocks up to
// `request_timeout` per endpoint tried. The process must ignore SIGPIPE (the coordinator does,
// in PrepareCoordinatorSignals): a write to a connection the member closed, a TLS one above all,
// raises it.
//
// Errors: kUnavailable "etcd ... has no quorum" when the members answer without a leader or time
// out committing, "etcd ... unreachable" when no endpoint could be reached, and "etcd ... did not
// answer" when an endpoint took the request but not answer it in time (a write's outcome is then
// unknown); kInvalid for a request etcd refuses by its limits (operations per txn, request size,
// duplicate keys in a txn), naming the limit; kIo for the rest, with etcd's message.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"

namespace trainlet::coordinator {

struct EtcdClientConfig {
  // Client URLs: http://host:port or https://host:port. At least one.
  std::vector<std::string> endpoints;
  // TLS, for https endpoints: the CA that signed the members' certificates, and this client's
  // certificate and key when the members require client certificates ("" for none).
  std::string ca_file;
  std::string cert_file;
  std::string key_file;
  std::chrono::milliseconds request_timeout{5000};  // per endpoint tried
  std::chrono::milliseconds connect_timeout{1000};
};

struct EtcdKeyValue {
  std::string key;
  std::string value;
  int64_t create_revision = 0;  // the revision that created the key (0: no such key)
  int64_t mod_revision = 0;     // the revision of its last write
  int64_t version = 0;          // writes since it was created
  int64_t lease = 0;            // the lease it is attached to, 0 for none
};

// One condition of a txn, compared against the key as it is when etcd applies the txn. A key
// that does not exist has every revision 0.
struct EtcdCompare {
  enum class Target { kVersion, kCreate, kMod, kValue, kLease };
  enum class Result { kEqual, kGreater, kLess, kNotEqual };
  std::string key;
  Target target = Target::kMod;
  Result result = Result::kEqual;
  int64_t number = 0;  // for revisions, version and lease
  std::string value;   // for kValue
};

// One operation of a txn: put a key, delete a key (or [key, range_end)), or read a range.
struct EtcdOp {
  enum class Kind { kPut, kDelete, kRange };
  Kind kind = Kind::kPut;
  std::string key;
  std::string range_end;  // "" for the key alone
  std::string value;      // puts
  int64_t lease = 0;      // puts: attach to this lease (0: none)

  static EtcdOp Put(std::string key, std::string value, int64_t lease = 0);
  static EtcdOp Delete(std::string key);
  static EtcdOp Range(std::string key, std::string range_end = "");
};

struct EtcdTxnResult {
  bool succeeded = false;  // the compares held and `success` ran (else `failure` ran)
  int64_t revision = 0;    // the store's revision after the txn
  // For each op of the branch that ran, in order: the keys a range op read (empty for others).
  std::vector<std::vector<EtcdKeyValue>> ranges;
};

class EtcdClient {
 public:
  // Checks the config (kInvalid naming the field: "endpoints", "ca_file", ...) and prepares the
  // connections; connects lazily, so an unreachable cluster is reported by the first request.
  static Result<std::unique_ptr<EtcdClient>> Create(EtcdClientConfig config);
  ~EtcdClient();
  EtcdClient(const EtcdClient&) = delete;
  EtcdClient& operator=(const EtcdClient&) = delete;

  // The endpoints, comma-separated, for messages.
  std::string endpoints() const;

  // Keys in [key, range_end) ("" range_end: the key alone), in key order; linearizable.
  Result<std::vector<EtcdKeyValue>> Range(const std::string& key, const std::string& range_end);
  // If every compare holds, runs `success`, else `failure`; atomically, in one revision.
  Result<EtcdTxnResult> Txn(const std::vector<EtcdCompare>& compares,
                            const std::vector<EtcdOp>& success, const std::vector<EtcdOp>& failure);

  // A lease of `ttl` seconds (etcd may grant more); returns its ID.
  Result<int64_t> LeaseGrant(int64_t ttl_seconds);
  // Renews the lease; returns its remaining TTL in seconds, 0 when it has expired (or never was).
  Result<int64_t> LeaseKeepAlive(int64_t lease_id);
  // Revokes the lease, deleting the keys attached to it. OK when it had already expired.
  Status LeaseRevoke(int64_t lease_id);

  // Whether the member at the first endpoint is the cluster's leader (maintenance status), for
  // tests and diagnostics.
  Result<bool> FirstEndpointIsLeader();

  // The end of the range of every key starting with `prefix` (etcd's "prefix + 1").
  static std::string PrefixEnd(const std::string& prefix);

 private:
  struct Connection;
  explicit EtcdClient(EtcdClientConfig config);
  // POSTs `body` (JSON) to `path` on the endpoints in turn; returns the response body (JSON).
  // `may_resend`: the request may go to the next endpoint after one that took it but did not
  // answer (reads); writes are resent only where they cannot have been applied.
  Result<std::string> Post(const std::string& path, const std::string& body, bool may_resend);

  // Constant after construction.
  const EtcdClientConfig config_;
  std::vector<std::unique_ptr<Connection>> connections_;  // one per endpoint
  // The endpoint that answered last, tried first.
  size_t current_ = 0;
};

}  // namespace trainlet::coordinator
