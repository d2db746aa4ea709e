// The coordinator's durable state: TrainJobs, their status, the runtimes they refer to, the
// nodes an operator cordoned or drained, and Kueue's queue objects (ClusterQueues, ...). JobStore
// is the interface; two backends sit behind it:
//   - SqliteJobStore (sqlite_job_store.h): one database under --state-dir, the default, for one
//     coordinator;
//   - EtcdJobStore (etcd_job_store.h): keys in an etcd cluster, for coordinators in high
//     availability (`store: etcd`).
// OpenJobStore (job_store_config.h) picks one from the coordinator's config.
//
// Durability: when a write method returns OK the change is durable (on disk for SQLite, committed
// by a quorum of etcd members for etcd), so the coordinator may acknowledge it.
//
// Threading: a JobStore is owned by the coordinator's event loop and is not thread-safe. Every
// write waits for its backend (an fsync, or an etcd round trip); the loop blocks on it on
// purpose, because the design says a job is stored before the operator hears "created".
//
// Errors, for every backend: kExists / kNotFound for names that are / are not there; kInvalid for
// state written by a newer trainlet or a write the backend refuses by its limits (etcd's
// operations per transaction, request size); kUnavailable when the backend cannot be reached or
// cannot commit now (etcd unreachable, or without quorum: "no quorum"), where retrying later may
// help; kIo for anything else the backend refused, with where and why. A stored status that no
// longer parses is kIo too, naming the job, and so is one holding a phase, rank state or attempt
// result that is not one trainlet knows (stored_status.h), naming the value.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "trainlet/v1/operator.pb.h"

namespace trainlet::coordinator {

struct JobRecord {
  std::string name;
  std::string spec_yaml;     // the TrainJob document as applied
  std::string runtime_kind;  // TrainingRuntime or ClusterTrainingRuntime
  std::string runtime_name;
  std::string runtime_yaml;  // the runtime as resolved when the job was created
  v1::JobStatus status;      // stored as serialized protobuf; read back with the states typed
                             // (stored_status.h)
};

struct RuntimeRecord {
  std::string kind;  // TrainingRuntime or ClusterTrainingRuntime
  std::string name;
  std::string yaml;
};

// A Kueue object as applied (common/kueue/kueue_model.h): kind ResourceFlavor, ClusterQueue,
// LocalQueue or WorkloadPriorityClass, kept by (kind, namespace, name). namespace_ is "" for the
// cluster-scoped kinds (all but LocalQueue).
struct QueueObjectRecord {
  std::string kind;
  std::string namespace_;
  std::string name;
  std::string yaml;  // the document as applied (re-emitted), parsed again at load
  bool operator==(const QueueObjectRecord&) const = default;
};

// A node taken out of placement by `trainletctl cordon` or `drain`, kept by node name.
struct NodeCordonRecord {
  std::string node;
  std::string reason;         // as the operator gave it; "" for none
  bool drain = false;         // cordoned by a drain (shown as reason Drained)
  int64_t since_unix_ms = 0;  // when it was cordoned
};

// Where NodeRegistry keeps cordons: JobStore, or a fake in tests, so the registry and its tests
// need no database. Errors as JobStore's.
class NodeCordonStore {
 public:
  virtual ~NodeCordonStore() = default;
  // Inserts or replaces the node's record.
  virtual Status PutNodeCordon(const NodeCordonRecord& cordon) = 0;
  // OK for a node with no record too.
  virtual Status DeleteNodeCordon(const std::string& node) = 0;
  // Ordered by node name.
  virtual Result<std::vector<NodeCordonRecord>> ListNodeCordons() = 0;
};

class JobStore : public NodeCordonStore {
 public:
  // The SQLite backend's file under the state dir (SqliteJobStore::kFileName); here because
  // callers that predate the interface name it so.
  static constexpr const char* kFileName = "trainlet.db";
  // Opens the default backend, SQLite, under `state_dir` (SqliteJobStore::Open).
  static Result<std::unique_ptr<JobStore>> Open(const std::string& state_dir);

  ~JobStore() override = default;

  // Where the state lives, for messages: "state dir /var/lib/trainlet", "etcd http://a:2379
  // (prefix /trainlet/prod/)".
  virtual std::string location() const = 0;

  // Whether new work may be accepted: kIo naming the store when it is read-only or has less than
  // `min_free_bytes` available ("no space left"). Writes are checked on their own too; this
  // refuses work before a half-full disk fails it midway. Backends that cannot tell say OK.
  virtual Status CheckSpace(uint64_t min_free_bytes) const = 0;

  // kExists "trainjob/<name> already exists" when a job of that name is stored.
  virtual Status CreateJob(const JobRecord& job) = 0;
  // Replaces the stored status; kNotFound when there is no such job.
  virtual Status UpdateStatus(const std::string& name, const v1::JobStatus& status) = 0;
  // Replaces the stored TrainJob document (only spec.suspend may change after creation; the
  // caller checks that); kNotFound when there is no such job.
  virtual Status UpdateSpec(const std::string& name, const std::string& spec_yaml) = 0;
  // nullopt when there is no such job.
  virtual Result<std::optional<JobRecord>> GetJob(const std::string& name) = 0;
  // Every job, oldest first (a job deleted and created again is the newest).
  virtual Result<std::vector<JobRecord>> ListJobs() = 0;
  // kNotFound when there is no such job.
  virtual Status DeleteJob(const std::string& name) = 0;

  // Inserts or replaces the runtime with this (kind, name).
  virtual Status PutRuntime(const RuntimeRecord& runtime) = 0;
  virtual Result<std::optional<RuntimeRecord>> GetRuntime(const std::string& kind,
                                                          const std::string& name) = 0;
  // Ordered by kind, then name.
  virtual Result<std::vector<RuntimeRecord>> ListRuntimes() = 0;

  // Kueue's queue objects (QueueCatalog, queue_catalog.h). Inserts or replaces the object with
  // this (kind, namespace, name), as a re-apply replaces it.
  virtual Status PutQueueObject(const QueueObjectRecord& object) = 0;
  // kNotFound "<kind>/<name> not found" when there is none.
  virtual Status DeleteQueueObject(const std::string& kind, const std::string& namespace_,
                                   const std::string& name) = 0;
  // Ordered by kind, then namespace, then name.
  virtual Result<std::vector<QueueObjectRecord>> ListQueueObjects() = 0;

  // The cluster's identity (issue 19, defect 3): made once, when the store is initialised
  // (ClusterIdentity, cluster_identity.h), and given to every agent at registration. "" when the
  // store holds none (a new or lost store, or one written before identities).
  virtual Result<std::string> GetClusterId() = 0;
  // Stores `id` as the cluster's identity, replacing any.
  virtual Status PutClusterId(const std::string& id) = 0;

  // Small named values of the cluster that are none of the above and are rewritten whole, such
  // as fair sharing's usage history (JobAdmitter, kFairShareHistoryKey). Keys are short ASCII
  // names; values are opaque bytes, at most 64 KiB. "" when none is stored.
  virtual Result<std::string> GetClusterValue(const std::string& key) = 0;
  // Stores `value` under `key`, replacing any.
  virtual Status PutClusterValue(const std::string& key, const std::string& value) = 0;
  // Every cluster value whose key starts with `prefix`, as (key, value), ordered by key: the
  // values kept one key each, such as MissedPurges' tombstones (missed_purges_tombstone.h).
  virtual Result<std::vector<std::pair<std::string, std::string>>> ListClusterValues(
      const std::string& prefix) = 0;
  // Removes `key`'s value; OK when there is none.
  virtual Status DeleteClusterValue(const std::string& key) = 0;

  // Runs `body`; its writes commit together when it returns OK and are all rolled back when it
  // returns an error (which is then returned) or throws. Nests: an inner failure rolls back only
  // the inner body's writes, and the outer body decides what to do with the error. Only the
  // outermost commit waits for the backend. Reads inside `body` see its writes. A backend may
  // report a write's kExists / kNotFound at the commit (as Transaction's result) rather than at
  // the call (etcd checks them in the one txn it commits).
  virtual Status Transaction(const std::function<Status()>& body) = 0;

  // Group commit. As Transaction, but the outermost commit need not be durable when this returns:
  // it is once Sync() returns OK, or once a later Transaction commits (a backend that syncs a log,
  // as SQLite's WAL, makes the earlier commits durable with it). For a group of writes of which
  // nothing may be heard outside the process before the last is durable: the caller makes sure
  // one of those two comes first (JobController::Apply: the apply's jobs and the placement of the
  // same pass, one WAL sync instead of two). Backends whose every commit is durable (etcd) run
  // Transaction.
  virtual Status TransactionDeferringSync(const std::function<Status()>& body) {
    return Transaction(body);
  }
  // Makes every commit so far durable; OK at once when none waits. kIo when the backend cannot:
  // what was committed since the last durable commit may then be lost in a crash, and no later
  // Sync says otherwise (a failed fsync may have dropped the pages it failed to write).
  virtual Status Sync() { return Status::Ok(); }
};

}  // namespace trainlet::coordinator
