// The job store's SQLite backend, the default (`store: sqlite`): one database,
// <state_dir>/trainlet.db, in WAL mode with synchronous=FULL: when a write method returns OK the
// change is on disk and survives a crash of the process or the machine, so the coordinator may
// acknowledge it.
//
// Threading: as JobStore's (owned by the event loop; every write waits for an fsync, about a
// millisecond on SSDs).
//
// Errors: as JobStore's. kInvalid for a database written by a newer trainlet; kIo for anything
// SQLite or the file system refused (including a file that is not a database, or a corrupt one),
// with the path and SQLite's message; a full or read-only file system says so ("no space left on
// device", "read-only file system").
#pragma once

#include <sqlite3.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "coordinator/job_store.h"

namespace trainlet::coordinator {

class SqliteJobStore : public JobStore {
 public:
  // The schema version this build writes (PRAGMA user_version). Older databases are migrated;
  // newer ones are refused rather than misread.
  // 2 added node_cordons; 3 added queue_objects (Kueue's ClusterQueues, LocalQueues, ...).
  static constexpr int kSchemaVersion = 4;
  static constexpr const char* kFileName = JobStore::kFileName;

  // Opens <state_dir>/trainlet.db, creating the directory and the schema when missing. The
  // directory is made 0700 and the database, -wal and -shm files 0600, whatever the umask or
  // their earlier modes: job env may hold secrets.
  static Result<std::unique_ptr<SqliteJobStore>> Open(const std::string& state_dir);
  ~SqliteJobStore() override;
  SqliteJobStore(const SqliteJobStore&) = delete;
  SqliteJobStore& operator=(const SqliteJobStore&) = delete;

  const std::string& path() const { return path_; }
  // The directory holding the database.
  std::string state_dir() const;
  std::string location() const override;  // "state dir <dir>"

  // Whether new work may be accepted: kIo naming the state dir when its file system is
  // read-only or has less than `min_free_bytes` available to this user ("no space left"). Writes
  // are checked on their own too; this refuses work before a half-full disk fails it midway.
  Status CheckSpace(uint64_t min_free_bytes) const override;

  // kExists "trainjob/<name> already exists" when a job of that name is stored.
  Status CreateJob(const JobRecord& job) override;
  // Replaces the stored status; kNotFound when there is no such job.
  Status UpdateStatus(const std::string& name, const v1::JobStatus& status) override;
  // Replaces the stored TrainJob document (only spec.suspend may change after creation; the
  // caller checks that); kNotFound when there is no such job.
  Status UpdateSpec(const std::string& name, const std::string& spec_yaml) override;
  // nullopt when there is no such job.
  Result<std::optional<JobRecord>> GetJob(const std::string& name) override;
  // Every job, oldest first.
  Result<std::vector<JobRecord>> ListJobs() override;
  // kNotFound when there is no such job.
  Status DeleteJob(const std::string& name) override;

  // Inserts or replaces the runtime with this (kind, name).
  Status PutRuntime(const RuntimeRecord& runtime) override;
  Result<std::optional<RuntimeRecord>> GetRuntime(const std::string& kind,
                                                  const std::string& name) override;
  // Ordered by kind, then name.
  Result<std::vector<RuntimeRecord>> ListRuntimes() override;

  // NodeCordonStore: each write is on disk when it returns OK.
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

  // Runs `body`; its writes commit together when it returns OK and are all rolled back when it
  // returns an error (which is then returned). Nests: an inner failure rolls back only the inner
  // body's writes, and the outer body decides what to do with the error. Only the outermost
  // commit waits for the disk.
  Status Transaction(const std::function<Status()>& body) override;
  // The outermost commit with synchronous=NORMAL: written to the WAL, not synced. The next
  // Transaction's commit (synchronous=FULL) syncs the WAL file, and with it every frame written
  // before; Sync syncs it by itself (the WAL's xSync). A commit that failed in its sync while an
  // earlier one waited for it makes every later Sync fail: Linux may have dropped the pages it
  // could not write and report the next fsync OK.
  Status TransactionDeferringSync(const std::function<Status()>& body) override;
  Status Sync() override;

 private:
  // One row of the `cluster` table ("" when absent); `what` names it in errors.
  Result<std::string> GetClusterRow(const std::string& key, const std::string& what);
  Status PutClusterRow(const std::string& key, const std::string& value, const std::string& what);

  struct DbCloser {
    void operator()(sqlite3* db) const { sqlite3_close_v2(db); }
  };
  struct StmtFinalizer {
    void operator()(sqlite3_stmt* s) const { sqlite3_finalize(s); }
  };
  using StmtPtr = std::unique_ptr<sqlite3_stmt, StmtFinalizer>;

  SqliteJobStore(std::string path, sqlite3* db);
  Status Init();
  Status Exec(const char* sql);
  Status Error(const std::string& what) const;  // kIo: "<path>: <what>: <sqlite message>"
  // The cached prepared statement for `sql` (a string literal), prepared on first use. The
  // caller resets it when done (StatementUse in the .cpp does).
  Result<sqlite3_stmt*> Prepare(const char* sql);
  Result<JobRecord> ReadJob(sqlite3_stmt* stmt);

  // Constant after construction.
  const std::string path_;
  std::unique_ptr<sqlite3, DbCloser> db_;
  // Prepared once, reused: keyed by the literal's address.
  std::unordered_map<const char*, StmtPtr> statements_;
  int transaction_depth_ = 0;
  bool unsynced_ = false;     // a deferred commit is not known to be on disk yet
  bool sync_failed_ = false;  // see TransactionDeferringSync
  bool deferring_ = false;    // the outermost transaction under way commits without a sync
};

}  // namespace trainlet::coordinator
