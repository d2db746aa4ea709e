// The job store's etcd backend (`store: etcd`), for coordinators in high availability: the same
// records as SqliteJobStore, as keys under one prefix of an etcd cluster.
//
// Keys (names escaped: '%' -> %25, '/' -> %2F):
//   <prefix>schema                    the layout version, "1"
//   <prefix>jobs/<name>/meta          StoredJobMeta (store.proto): runtime kind, name, YAML
//   <prefix>jobs/<name>/spec          the TrainJob YAML as applied
//   <prefix>jobs/<name>/status        v1::JobStatus, serialized, as SQLite stores it
//   <prefix>runtimes/<kind>/<name>    the runtime's YAML
//   <prefix>cordons/<node>            StoredNodeCordon (store.proto)
//   <prefix>queues/<kind>/<namespace>/<name>  a Kueue queue object's YAML (namespace "" for the
//                                     cluster-scoped kinds); older trainlets ignore these keys
// Jobs are listed by the create revision of their meta key, then by their ordinal inside the
// transaction that created them: creation order, as SQLite's.
//
// Durability: every write is one etcd txn; when it returns OK a quorum of members has it on disk.
// Transaction() buffers the body's writes and sends them as ONE txn at the outermost commit, so
// they land all or nothing. etcd bounds a txn (--max-txn-ops, 128 by default, and
// --max-request-bytes, 1.5 MiB): a transaction past `max_txn_ops` / `max_request_bytes` is
// refused whole with kInvalid naming the limit, never split.
//
// Fencing: every write txn carries the compare set by SetWriteFence (none by default). Leader
// election sets it to "the leader key still has the create revision it had when we won", so a
// deposed leader's writes fail (kUnavailable "not the leader") instead of landing.
//
// Inside a transaction, CreateJob, UpdateStatus, UpdateSpec and DeleteJob of a job the
// transaction has not touched yet are checked at commit, as compares of the one txn (no round trip
// per record), and a failed check fails the whole transaction with kExists / kNotFound naming the
// job; checks against the transaction's own writes are made at the call.
//
// Threading and errors: as JobStore's and EtcdClient's (kUnavailable "no quorum" /
// "unreachable").
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "coordinator/etcd_client.h"
#include "coordinator/job_store.h"

namespace trainlet::coordinator {

struct EtcdStoreConfig {
  EtcdClientConfig client;
  // Every key starts with it; one etcd cluster may hold several trainlet clusters.
  std::string prefix = "/trainlet/default/";
  // The members' --max-txn-ops and --max-request-bytes: larger transactions are refused here,
  // with a message naming the limit, before etcd refuses them less clearly.
  size_t max_txn_ops = 128;
  size_t max_request_bytes = 1536 * 1024;
};

class EtcdJobStore : public JobStore {
 public:
  static constexpr int kSchemaVersion = 1;

  // Connects, checks the layout version under the prefix (kInvalid for a newer one) and writes
  // it when the prefix is new. kUnavailable when etcd cannot be reached or has no quorum.
  static Result<std::unique_ptr<EtcdJobStore>> Open(EtcdStoreConfig config);
  ~EtcdJobStore() override;
  EtcdJobStore(const EtcdJobStore&) = delete;
  EtcdJobStore& operator=(const EtcdJobStore&) = delete;

  std::string location() const override;  // "etcd <endpoints> (prefix <prefix>)"
  // OK: etcd enforces its own quota (--quota-backend-bytes); a write past it fails with kIo.
  Status CheckSpace(uint64_t min_free_bytes) const override;

  Status CreateJob(const JobRecord& job) override;
  Status UpdateStatus(const std::string& name, const v1::JobStatus& status) override;
  Status UpdateSpec(const std::string& name, const std::string& spec_yaml) override;
  Result<std::optional<JobRecord>> GetJob(const std::string& name) override;
  Result<std::vector<JobRecord>> ListJobs() override;
  Status DeleteJob(const std::string& name) override;

  Status PutRuntime(const RuntimeRecord& runtime) override;
  Result<std::optional<RuntimeRecord>> GetRuntime(const std::string& kind,
                                                  const std::string& name) override;
  Result<std::vector<RuntimeRecord>> ListRuntimes() override;

  Status PutNodeCordon(const NodeCordonRecord& cordon) override;
  Status DeleteNodeCordon(const std::string& node) override;
  Result<std::vector<NodeCordonRecord>> ListNodeCordons() override;

  // Kueue's queue objects: as JobStore's.
  Status PutQueueObject(const QueueObjectRecord& object) override;
  Status DeleteQueueObject(const std::string& kind, const std::string& namespace_,
                           const std::string& name) override;
  Result<std::vector<QueueObjectRecord>> ListQueueObjects() override;
  Result<std::string> GetClusterId() override;
  Status PutClusterId(const std::string& id) override;
  Result<std::string> GetClusterValue(const std::string& key) override;
  Status PutClusterValue(const std::string& key, const std::string& value) override;
  Result<std::vector<std::pair<std::string, std::string>>> ListClusterValues(
      const std::string& prefix) override;
  Status DeleteClusterValue(const std::string& key) override;

  Status Transaction(const std::function<Status()>& body) override;

  // The compare every write txn carries from now on (nullopt: none). When it does not hold, the
  // write fails with kUnavailable "not the leader" and nothing of it lands.
  void SetWriteFence(std::optional<EtcdCompare> fence) {
    fence_ = std::move(fence);
    fence_lost_ = false;
  }
  // A write failed because the fence no longer held: another coordinator leads. Stays true
  // until the next SetWriteFence.
  bool fence_lost() const { return fence_lost_; }

  // Deletes every job, runtime, cordon and queue object under the prefix, the purge tombstones
  // (missed_purges_tombstone.h), which name jobs of those records, and the queue objects'
  // Terminating marks (queue_catalog.h), in one txn (`--migrate-store --force`).
  Status DeleteRecords();
  // How many keys are under the prefix (the layout version included).
  Result<int64_t> CountKeys();
  size_t max_txn_ops() const { return config_.max_txn_ops; }

  const std::string& prefix() const { return prefix_; }
  EtcdClient& client() { return *client_; }
  // The client's config (endpoints, TLS), for other connections to the same cluster.
  const EtcdClientConfig& client_config() const { return config_.client; }

 private:
  // A condition one write needs: the key exists (kPresent) or not (kAbsent). `what` names the
  // record for the error: "trainjob/<name>".
  struct Precondition {
    enum class Kind { kPresent, kAbsent };
    Kind kind;
    std::string key;
    std::string what;
  };
  // The writes of the open transaction, by key; nullopt is a delete. One entry per key: etcd
  // refuses a txn that writes a key twice.
  struct Pending {
    std::map<std::string, std::optional<std::string>> writes;
    std::vector<Precondition> checks;  // sent as compares at commit
    uint32_t next_ordinal = 0;
  };

  // A compare that holds when the precondition does (a missing key has create revision 0), and
  // the error when it does not: kExists / kNotFound naming the record.
  static EtcdCompare CompareOf(const Precondition& p);
  static Status Violation(const Precondition& p);

  EtcdJobStore(EtcdStoreConfig config, std::unique_ptr<EtcdClient> client);
  Status Init();

  // The one write path: checks `pre` (now, or as compares of the txn) and writes `ops` (puts and
  // deletes), at once outside a transaction, buffered inside one.
  Status Write(const std::vector<Precondition>& pre, const std::vector<EtcdOp>& ops);
  // Sends checks + ops as one txn with the fence; maps a failed compare to its error.
  Status Commit(const std::vector<Precondition>& checks, const std::vector<EtcdOp>& ops);
  Status CheckLimits(size_t compares, const std::vector<EtcdOp>& ops) const;
  // Keys in [begin, end) as committed, with the open transaction's writes laid over them.
  Result<std::vector<EtcdKeyValue>> Read(const std::string& begin, const std::string& end);

  std::string JobKey(const std::string& name, const char* field) const;
  std::string RuntimeKey(const std::string& kind, const std::string& name) const;
  std::string CordonKey(const std::string& node) const;
  std::string QueueKey(const std::string& kind, const std::string& namespace_,
                       const std::string& name) const;

  // Constant after construction.
  const EtcdStoreConfig config_;
  const std::string prefix_;  // config_.prefix, ending with '/'
  std::unique_ptr<EtcdClient> client_;

  std::optional<EtcdCompare> fence_;
  bool fence_lost_ = false;
  // The open transaction (empty when none); one level per nesting, each a copy to roll back to.
  std::vector<Pending> pending_;
};

}  // namespace trainlet::coordinator
