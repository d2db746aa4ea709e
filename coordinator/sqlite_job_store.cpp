#include "coordinator/sqlite_job_store.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <utility>

#include "common/platform/env.h"
#include "coordinator/stored_status.h"

namespace trainlet::coordinator {

namespace fs = std::filesystem;

namespace {

// Version 1. `seq` gives ListJobs its creation order; a job deleted and applied again is new.
constexpr const char* kSchemaV1 = R"sql(
CREATE TABLE jobs (
  seq          INTEGER PRIMARY KEY AUTOINCREMENT,
  name         TEXT NOT NULL UNIQUE,
  spec_yaml    TEXT NOT NULL,
  runtime_kind TEXT NOT NULL,
  runtime_name TEXT NOT NULL,
  runtime_yaml TEXT NOT NULL,
  status       BLOB NOT NULL
);
CREATE TABLE runtimes (
  kind TEXT NOT NULL,
  name TEXT NOT NULL,
  yaml TEXT NOT NULL,
  PRIMARY KEY (kind, name)
);
PRAGMA user_version = 1;
)sql";

// Version 2: node cordons (`trainletctl cordon` / `drain`), so they outlive a restart.
constexpr const char* kSchemaV2 = R"sql(
CREATE TABLE node_cordons (
  node          TEXT PRIMARY KEY,
  reason        TEXT NOT NULL,
  drain         INTEGER NOT NULL,
  since_unix_ms INTEGER NOT NULL
);
PRAGMA user_version = 2;
)sql";

// Version 3: Kueue's queue objects (issue 14). namespace is '' for the cluster-scoped kinds.
constexpr const char* kSchemaV3 = R"sql(
CREATE TABLE queue_objects (
  kind      TEXT NOT NULL,
  namespace TEXT NOT NULL,
  name      TEXT NOT NULL,
  yaml      TEXT NOT NULL,
  PRIMARY KEY (kind, namespace, name)
);
PRAGMA user_version = 3;
)sql";

// Version 4: the cluster's identity (issue 19, defect 3), one row under key 'cluster_id'. IF NOT
// EXISTS: a database whose version was set back by hand (the tests do) keeps the table.
constexpr const char* kSchemaV4 = R"sql(
CREATE TABLE IF NOT EXISTS cluster (
  key   TEXT PRIMARY KEY,
  value TEXT NOT NULL
);
PRAGMA user_version = 4;
)sql";

// A writer that waits longer than this for the lock gets SQLITE_BUSY; only other processes
// (a `sqlite3` shell, a backup) can hold it, since one SqliteJobStore owns the database.
constexpr int kBusyTimeoutMs = 5000;

constexpr const char* kInsertJob =
    "INSERT INTO jobs (name, spec_yaml, runtime_kind, runtime_name, runtime_yaml, status) "
    "VALUES (?1, ?2, ?3, ?4, ?5, ?6)";
constexpr const char* kUpdateStatus = "UPDATE jobs SET status = ?2 WHERE name = ?1";
constexpr const char* kUpdateSpec = "UPDATE jobs SET spec_yaml = ?2 WHERE name = ?1";
constexpr const char* kSelectJob =
    "SELECT name, spec_yaml, runtime_kind, runtime_name, runtime_yaml, status FROM jobs "
    "WHERE name = ?1";
constexpr const char* kSelectJobs =
    "SELECT name, spec_yaml, runtime_kind, runtime_name, runtime_yaml, status FROM jobs "
    "ORDER BY seq";
constexpr const char* kDeleteJob = "DELETE FROM jobs WHERE name = ?1";
constexpr const char* kUpsertRuntime =
    "INSERT INTO runtimes (kind, name, yaml) VALUES (?1, ?2, ?3) "
    "ON CONFLICT (kind, name) DO UPDATE SET yaml = excluded.yaml";
constexpr const char* kSelectRuntime =
    "SELECT kind, name, yaml FROM runtimes WHERE kind = ?1 AND name = ?2";
constexpr const char* kSelectRuntimes = "SELECT kind, name, yaml FROM runtimes ORDER BY kind, name";
constexpr const char* kUpsertCordon =
    "INSERT INTO node_cordons (node, reason, drain, since_unix_ms) VALUES (?1, ?2, ?3, ?4) "
    "ON CONFLICT (node) DO UPDATE SET reason = excluded.reason, drain = excluded.drain, "
    "since_unix_ms = excluded.since_unix_ms";
constexpr const char* kDeleteCordon = "DELETE FROM node_cordons WHERE node = ?1";
constexpr const char* kSelectCordons =
    "SELECT node, reason, drain, since_unix_ms FROM node_cordons ORDER BY node";

constexpr const char* kUpsertQueueObject =
    "INSERT INTO queue_objects (kind, namespace, name, yaml) VALUES (?1, ?2, ?3, ?4) "
    "ON CONFLICT (kind, namespace, name) DO UPDATE SET yaml = excluded.yaml";
constexpr const char* kDeleteQueueObject =
    "DELETE FROM queue_objects WHERE kind = ?1 AND namespace = ?2 AND name = ?3";
constexpr const char* kSelectQueueObjects =
    "SELECT kind, namespace, name, yaml FROM queue_objects ORDER BY kind, namespace, name";

// Resets a cached statement when the use ends, whatever the path out, so the next use starts
// clean and no read transaction is left open.
class StatementUse {
 public:
  explicit StatementUse(sqlite3_stmt* s) : s_(s) {}
  ~StatementUse() {
    sqlite3_reset(s_);
    sqlite3_clear_bindings(s_);
  }
  StatementUse(const StatementUse&) = delete;
  StatementUse& operator=(const StatementUse&) = delete;

 private:
  sqlite3_stmt* s_;
};

int BindText(sqlite3_stmt* s, int i, const std::string& v) {
  return sqlite3_bind_text(s, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
}

int BindBlob(sqlite3_stmt* s, int i, const std::string& v) {
  return sqlite3_bind_blob(s, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
}

std::string ColumnText(sqlite3_stmt* s, int i) {
  const auto* p = reinterpret_cast<const char*>(sqlite3_column_blob(s, i));
  int n = sqlite3_column_bytes(s, i);
  return p == nullptr ? std::string() : std::string(p, static_cast<size_t>(n));
}

// What a failed write means for the operator, from SQLite's extended code and the OS error behind
// it: SQLite says "database or disk is full" or "disk I/O error", which hides the cause.
std::string DiskHint(int extended_code, int sys_errno) {
  const int primary = extended_code & 0xff;
  // The OS error is only the cause of an I/O-class result; after others it may be stale.
  const bool io = primary == SQLITE_FULL || primary == SQLITE_IOERR || primary == SQLITE_READONLY ||
                  primary == SQLITE_CANTOPEN;
  if (!io) return "";
  if (primary == SQLITE_FULL || sys_errno == ENOSPC || sys_errno == EDQUOT) {
    return " (no space left on device)";
  }
  if (primary == SQLITE_READONLY || sys_errno == EROFS) return " (read-only file system)";
  return sys_errno != 0 ? std::string(" (") + std::strerror(sys_errno) + ")" : "";
}

// Job specs may carry credentials in env, and SQLite writes them to the database and its WAL:
// keep those files to the coordinator's user (0600), whatever the umask. SQLite creates -wal and
// -shm with the database's mode, so tightening the database before the first write covers the
// files to come; files left by an earlier run with looser bits are tightened too.
Status MakeStoreFilesPrivate(const std::string& db_path) {
  for (const char* suffix : {"", "-wal", "-shm"}) {
    const std::string file = db_path + suffix;
    if (::chmod(file.c_str(), 0600) != 0 && errno != ENOENT) {
      return IoError(file + ": cannot make it private (chmod 0600): " + std::strerror(errno));
    }
  }
  return Status::Ok();
}

}  // namespace

SqliteJobStore::SqliteJobStore(std::string path, sqlite3* db) : path_(std::move(path)), db_(db) {}

SqliteJobStore::~SqliteJobStore() {
  // Statements must be finalized before the connection closes, or the close is deferred.
  statements_.clear();
}

Result<std::unique_ptr<SqliteJobStore>> SqliteJobStore::Open(const std::string& state_dir) {
  std::error_code ec;
  fs::create_directories(state_dir, ec);
  if (ec) {
    return IoError("state dir " + state_dir + ": cannot create it: " + ec.message());
  }
  if (!fs::is_directory(state_dir, ec)) {
    return IoError("state dir " + state_dir + ": exists and is not a directory");
  }
  // SQLite's own message for this case is "unable to open database file"; say why. WAL also
  // needs to create trainlet.db-wal and -shm beside the database.
  if (access(state_dir.c_str(), W_OK | X_OK) != 0) {
    return IoError("state dir " + state_dir + ": not writable: " + std::strerror(errno));
  }
  // Job specs may carry credentials in env; keep them to the coordinator's user, also in a
  // directory the operator made with looser bits (`trainletctl local up --dir`, issue 19).
  bool tightened = false;
  if (Status s = platform::MakePrivateDirectory(state_dir, &tightened); !s.ok()) {
    return Status(s.code(), "state dir " + s.message());
  }
  if (tightened)
    spdlog::warn("state dir {}: made private (mode 0700): it holds job specs and their env",
                 state_dir);

  std::string path = (fs::path(state_dir) / kFileName).string();
  sqlite3* raw = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &raw, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr);
  std::unique_ptr<SqliteJobStore> store(
      new SqliteJobStore(path, raw));  // owns raw even when rc failed
  if (rc != SQLITE_OK) {
    return IoError(path +
                   ": cannot open: " + (raw != nullptr ? sqlite3_errmsg(raw) : sqlite3_errstr(rc)));
  }
  TRAINLET_RETURN_IF_ERROR(MakeStoreFilesPrivate(path));  // before Init writes anything
  TRAINLET_RETURN_IF_ERROR(store->Init());
  return store;
}

Status SqliteJobStore::Init() {
  sqlite3_extended_result_codes(db_.get(), 1);
  sqlite3_busy_timeout(db_.get(), kBusyTimeoutMs);

  // The first statement reads the header: a file that is not SQLite fails here.
  TRAINLET_ASSIGN_OR_RETURN(sqlite3_stmt * version_stmt, Prepare("PRAGMA user_version"));
  int version = 0;
  {
    StatementUse use(version_stmt);
    if (sqlite3_step(version_stmt) != SQLITE_ROW) return Error("reading the schema version");
    version = sqlite3_column_int(version_stmt, 0);
  }
  if (version > kSchemaVersion) {
    return InvalidError(path_ + ": schema version " + std::to_string(version) +
                        " was written by a newer trainlet; this one reads up to version " +
                        std::to_string(kSchemaVersion));
  }

  {
    TRAINLET_ASSIGN_OR_RETURN(sqlite3_stmt * wal, Prepare("PRAGMA journal_mode = WAL"));
    StatementUse use(wal);
    if (sqlite3_step(wal) != SQLITE_ROW) return Error("setting journal_mode=WAL");
    std::string mode = ColumnText(wal, 0);
    if (mode != "wal") {
      return IoError(path_ + ": journal_mode is \"" + mode + "\", WAL could not be enabled");
    }
  }
  // FULL: in WAL mode, NORMAL may lose the last commits on power loss; an acknowledged job must
  // not vanish.
  TRAINLET_RETURN_IF_ERROR(Exec("PRAGMA synchronous = FULL"));

  // Each step migrates one version up, in one transaction, so a crash leaves a whole version.
  if (version < 1) TRAINLET_RETURN_IF_ERROR(Transaction([&] { return Exec(kSchemaV1); }));
  if (version < 2) TRAINLET_RETURN_IF_ERROR(Transaction([&] { return Exec(kSchemaV2); }));
  if (version < 3) TRAINLET_RETURN_IF_ERROR(Transaction([&] { return Exec(kSchemaV3); }));
  if (version < 4) TRAINLET_RETURN_IF_ERROR(Transaction([&] { return Exec(kSchemaV4); }));
  return Status::Ok();
}

Status SqliteJobStore::Error(const std::string& what) const {
  return IoError(path_ + ": " + what + ": " + sqlite3_errmsg(db_.get()) +
                 DiskHint(sqlite3_extended_errcode(db_.get()), sqlite3_system_errno(db_.get())));
}

std::string SqliteJobStore::state_dir() const { return fs::path(path_).parent_path().string(); }

std::string SqliteJobStore::location() const { return "state dir " + state_dir(); }

Status SqliteJobStore::CheckSpace(uint64_t min_free_bytes) const {
  const std::string dir = state_dir();
  struct statvfs vfs {};
  if (statvfs(dir.c_str(), &vfs) != 0) {
    return IoError("state dir " + dir + ": " + std::strerror(errno));
  }
  if ((vfs.f_flag & ST_RDONLY) != 0) {
    return IoError("state dir " + dir + ": read-only file system: new work cannot be stored");
  }
  const uint64_t free_bytes = static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
  if (free_bytes < min_free_bytes) {
    return IoError("state dir " + dir + ": no space left on device (" +
                   std::to_string(free_bytes / 1024) + " KiB free, new work needs " +
                   std::to_string(min_free_bytes / 1024) + " KiB): new work is refused");
  }
  return Status::Ok();
}

Status SqliteJobStore::Exec(const char* sql) {
  char* err = nullptr;
  int rc = sqlite3_exec(db_.get(), sql, nullptr, nullptr, &err);
  if (rc == SQLITE_OK) return Status::Ok();
  std::string msg = err != nullptr ? err : sqlite3_errstr(rc);
  sqlite3_free(err);
  msg += DiskHint(sqlite3_extended_errcode(db_.get()), sqlite3_system_errno(db_.get()));
  std::string what(sql);
  what = what.substr(what.find_first_not_of('\n'));
  what = what.substr(0, what.find_first_of("\n("));
  return IoError(path_ + ": " + what + ": " + msg);
}

Result<sqlite3_stmt*> SqliteJobStore::Prepare(const char* sql) {
  auto it = statements_.find(sql);
  if (it != statements_.end()) return it->second.get();
  sqlite3_stmt* s = nullptr;
  if (sqlite3_prepare_v3(db_.get(), sql, -1, SQLITE_PREPARE_PERSISTENT, &s, nullptr) != SQLITE_OK) {
    sqlite3_finalize(s);
    return Error(std::string("preparing \"") + sql + "\"");
  }
  statements_.emplace(sql, StmtPtr(s));
  return s;
}

Status SqliteJobStore::CreateJob(const JobRecord& job) {
  TRAINLET_ASSIGN_OR_RETURN(sqlite3_stmt * s, Prepare(kInsertJob));
  StatementUse use(s);
  std::string status_bytes;
  TRAINLET_CHECK(job.status.SerializeToString(&status_bytes));
  BindText(s, 1, job.name);
  BindText(s, 2, job.spec_yaml);
  BindText(s, 3, job.runtime_kind);
  BindText(s, 4, job.runtime_name);
  BindText(s, 5, job.runtime_yaml);
  BindBlob(s, 6, status_bytes);
  int rc = sqlite3_step(s);
  if (rc == SQLITE_CONSTRAINT_UNIQUE) {
    return Status(ErrorCode::kExists, "trainjob/" + job.name + " already exists");
  }
  if (rc != SQLITE_DONE) return Error("storing trainjob/" + job.name);
  return Status::Ok();
}

Status SqliteJobStore::UpdateStatus(const std::string& name, const v1::JobStatus& status) {
  TRAINLET_ASSIGN_OR_RETURN(sqlite3_stmt * s, Prepare(kUpdateStatus));
  StatementUse use(s);
  std::string status_bytes;
  TRAINLET_CHECK(status.SerializeToString(&status_bytes));
  BindText(s, 1, name);
  BindBlob(s, 2, status_bytes);
  if (sqlite3_step(s) != SQLITE_DONE) return Error("updating the status of trainjob/" + name);
  if (sqlite3_changes(db_.get()) == 0) return NotFoundError("trainjob/" + name + " not found");
  return Status::Ok();
}

Status SqliteJobStore::UpdateSpec(const std::string& name, const std::string& spec_yaml) {
  TRAINLET_ASSIGN_OR_RETURN(sqlite3_stmt * s, Prepare(kUpdateSpec));
  StatementUse use(s);
  BindText(s, 1, name);
  BindText(s, 2, spec_yaml);
  if (sqlite3_step(s) != SQLITE_DONE) return Error("updating the spec of trainjob/" + name);
  if (sqlite3_changes(db_.get()) == 0) return NotFoundError("trainjob/" + name + " not found");
  return Status::Ok();
}

Result<JobRecord> SqliteJobStore::ReadJob(sqlite3_stmt* s) {
  JobRecord job;
  job.name = ColumnText(s, 0);
  job.spec_yaml = ColumnText(s, 1);
  job.runtime_kind = ColumnText(s, 2);
  job.runtime_name = ColumnText(s, 3);
  job.runtime_yaml = ColumnText(s, 4);
  const void* blob = sqlite3_column_blob(s, 5);
  int n = sqlite3_column_bytes(s, 5);
  if (!job.status.ParseFromArray(blob, n)) {
    return IoError(path_ + ": trainjob/" + job.name + ": stored status is not a valid JobStatus (" +
                   std::to_string(n) + " bytes)");
  }
  // Records written before the states were enums hold them as strings: typed once, here.
  if (Status s = UpgradeStoredStatus(job.status); !s.ok()) {
    return IoError(path_ + ": trainjob/" + job.name + ": stored status: " + s.message());
  }
  return job;
}

Result<std::optional<JobRecord>> SqliteJobStore::GetJob(const std::string& name) {
  TRAINLET_ASSIGN_OR_RETURN(sqlite3_stmt * s, Prepare(kSelectJob));
  StatementUse use(s);
  BindText(s, 1, name);
  int rc = sqlite3_step(s);
  if (rc == SQLITE_DONE) return std::optional<JobRecord>();
  if (rc != SQLITE_ROW) return Error("reading trainjob/" + name);
  TRAINLET_ASSIGN_OR_RETURN(JobRecord job, ReadJob(s));
  return std::optional<JobRecord>(std::move(job));
}

Result<std::vector<JobRecord>> SqliteJobStore::ListJobs() {
  TRAINLET_ASSIGN_OR_RETURN(sqlite3_stmt * s, Prepare(kSelectJobs));
  StatementUse use(s);
  std::vector<JobRecord> jobs;
  int rc;
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
    TRAINLET_ASSIGN_OR_RETURN(JobRecord job, ReadJob(s));
    jobs.push_back(std::move(job));
  }
  if (rc != SQLITE_DONE) return Error("listing trainjobs");
  return jobs;
}

Status SqliteJobStore::DeleteJob(const std::string& name) {
  TRAINLET_ASSIGN_OR_RETURN(sqlite3_stmt * s, Prepare(kDeleteJob));
  StatementUse use(s);
  BindText(s, 1, name);
  if (sqlite3_step(s) != SQLITE_DONE) return Error("deleting trainjob/" + name);
  if (sqlite3_changes(db_.get()) == 0) return NotFoundError("trainjob/" + name + " not found");
  return Status::Ok();
}

Status SqliteJobStore::PutRuntime(const RuntimeRecord& runtime) {
  TRAINLET_ASSIGN_OR_RETURN(sqlite3_stmt * s, Prepare(kUpsertRuntime));
  StatementUse use(s);
  BindText(s, 1, runtime.kind);
  BindText(s, 2, runtime.name);
  BindText(s, 3, runtime.yaml);
  if (sqlite3_step(s) != SQLITE_DONE) {
    return Error("storing " + runtime.kind + "/" + runtime.name);
  }
  return Status::Ok();
}

Result<std::optional<RuntimeRecord>> SqliteJobStore::GetRuntime(const std::string& kind,
                                                                const std::string& name) {
  TRAINLET_ASSIGN_OR_RETURN(sqlite3_stmt * s, Prepare(kSelectRuntime));
  StatementUse use(s);
  BindText(s, 1, kind);
  BindText(s, 2, name);
  int rc = sqlite3_step(s);
  if (rc == SQLITE_DONE) return std::optional<RuntimeRecord>();
  if (rc != SQLITE_ROW) return Error("reading " + kind + "/" + name);
  return std::optional<RuntimeRecord>(
      RuntimeRecord{ColumnText(s, 0), ColumnText(s, 1), ColumnText(s, 2)});
}

Result<std::vector<RuntimeRecord>> SqliteJobStore::ListRuntimes() {
  TRAINLET_ASSIGN_OR_RETURN(sqlite3_stmt * s, Prepare(kSelectRuntimes));
  StatementUse use(s);
  std::vector<RuntimeRecord> runtimes;
  int rc;
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
    runtimes.push_back(RuntimeRecord{ColumnText(s, 0), ColumnText(s, 1), ColumnText(s, 2)});
  }
  if (rc != SQLITE_DONE) return Error("listing runtimes");
  return runtimes;
}

Status SqliteJobStore::Transaction(const std::function<Status()>& body) {
  // Outermost: BEGIN IMMEDIATE takes the write lock up front, so a commit cannot fail with
  // SQLITE_BUSY after the body's work. Nested: a savepoint, so the inner body can fail alone.
  const std::string savepoint = "trainlet_tx_" + std::to_string(transaction_depth_);
  const bool outermost = transaction_depth_ == 0;
  TRAINLET_RETURN_IF_ERROR(
      Exec(outermost ? "BEGIN IMMEDIATE" : ("SAVEPOINT " + savepoint).c_str()));
  ++transaction_depth_;

  // Rolls back on every path out that did not commit, exceptions included.
  struct Rollback {
    SqliteJobStore* store;
    bool outermost;
    const std::string& savepoint;
    bool armed = true;
    ~Rollback() {
      if (!armed) return;
      --store->transaction_depth_;
      std::string sql =
          outermost ? "ROLLBACK" : "ROLLBACK TO " + savepoint + "; RELEASE " + savepoint;
      // A failed rollback leaves SQLite in autocommit with the changes discarded anyway.
      (void)store->Exec(sql.c_str());
    }
  } rollback{this, outermost, savepoint};

  Status st = body();
  if (!st.ok()) return st;
  std::string commit = outermost ? "COMMIT" : "RELEASE " + savepoint;
  Status commit_st = Exec(commit.c_str());
  if (!commit_st.ok()) {
    // Linux may have dropped the pages a failed fsync could not write, a deferred commit's
    // among them, and report the next fsync OK: no Sync may say they are on disk.
    if (outermost && unsynced_ && sqlite3_extended_errcode(db_.get()) == SQLITE_IOERR_FSYNC) {
      sync_failed_ = true;
    }
    return commit_st;  // still armed: roll back
  }
  rollback.armed = false;
  --transaction_depth_;
  // A synced commit syncs the whole WAL file: every deferred commit before it too.
  if (outermost && !deferring_) unsynced_ = false;
  return Status::Ok();
}

Status SqliteJobStore::TransactionDeferringSync(const std::function<Status()>& body) {
  if (transaction_depth_ > 0) return Transaction(body);  // the outer one decides
  // SQLite refuses to change the safety level inside a transaction: around it, then.
  TRAINLET_RETURN_IF_ERROR(Exec("PRAGMA synchronous = NORMAL"));
  deferring_ = true;
  const Status st = Transaction(body);
  deferring_ = false;
  // Outside a transaction this touches no file; if it failed, later commits would not be synced
  // and nobody would know.
  const Status full = Exec("PRAGMA synchronous = FULL");
  TRAINLET_CHECK_MSG(full.ok(), "store: cannot set synchronous=FULL again: " + full.message());
  if (st.ok()) unsynced_ = true;
  return st;
}

Status SqliteJobStore::Sync() {
  if (sync_failed_) {
    return IoError(path_ +
                   ": an earlier sync of the write-ahead log failed; what was written "
                   "since the last good sync may not be on disk");
  }
  if (!unsynced_) return Status::Ok();
  sqlite3_file* wal = nullptr;
  int rc = sqlite3_file_control(db_.get(), "main", SQLITE_FCNTL_JOURNAL_POINTER, &wal);
  if (rc == SQLITE_OK && wal != nullptr && wal->pMethods != nullptr) {
    rc = wal->pMethods->xSync(wal, SQLITE_SYNC_NORMAL);
  }
  if (rc != SQLITE_OK) {
    sync_failed_ = true;
    return IoError(path_ + ": syncing the write-ahead log: " + sqlite3_errstr(rc) +
                   DiskHint(rc, errno));
  }
  unsynced_ = false;
  return Status::Ok();
}

Status SqliteJobStore::PutNodeCordon(const NodeCordonRecord& cordon) {
  TRAINLET_ASSIGN_OR_RETURN(sqlite3_stmt * s, Prepare(kUpsertCordon));
  StatementUse use(s);
  BindText(s, 1, cordon.node);
  BindText(s, 2, cordon.reason);
  sqlite3_bind_int(s, 3, cordon.drain ? 1 : 0);
  sqlite3_bind_int64(s, 4, cordon.since_unix_ms);
  if (sqlite3_step(s) != SQLITE_DONE) return Error("storing the cordon of node " + cordon.node);
  return Status::Ok();
}

Status SqliteJobStore::DeleteNodeCordon(const std::string& node) {
  TRAINLET_ASSIGN_OR_RETURN(sqlite3_stmt * s, Prepare(kDeleteCordon));
  StatementUse use(s);
  BindText(s, 1, node);
  if (sqlite3_step(s) != SQLITE_DONE) return Error("removing the cordon of node " + node);
  return Status::Ok();
}

Result<std::vector<NodeCordonRecord>> SqliteJobStore::ListNodeCordons() {
  TRAINLET_ASSIGN_OR_RETURN(sqlite3_stmt * s, Prepare(kSelectCordons));
  StatementUse use(s);
  std::vector<NodeCordonRecord> out;
  int rc;
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
    out.push_back({ColumnText(s, 0), ColumnText(s, 1), sqlite3_column_int(s, 2) != 0,
                   sqlite3_column_int64(s, 3)});
  }
  if (rc != SQLITE_DONE) return Error("listing node cordons");
  return out;
}

Result<std::string> SqliteJobStore::GetClusterRow(const std::string& key, const std::string& what) {
  TRAINLET_ASSIGN_OR_RETURN(sqlite3_stmt * s, Prepare("SELECT value FROM cluster WHERE key = ?1"));
  StatementUse use(s);
  BindText(s, 1, key);
  const int rc = sqlite3_step(s);
  if (rc == SQLITE_ROW) return ColumnText(s, 0);
  if (rc != SQLITE_DONE) return Error("reading " + what);
  return std::string();
}

Status SqliteJobStore::PutClusterRow(const std::string& key, const std::string& value,
                                     const std::string& what) {
  TRAINLET_ASSIGN_OR_RETURN(sqlite3_stmt * s,
                            Prepare("INSERT OR REPLACE INTO cluster (key, value) VALUES (?1, ?2)"));
  StatementUse use(s);
  BindText(s, 1, key);
  BindText(s, 2, value);
  if (sqlite3_step(s) != SQLITE_DONE) return Error("storing " + what);
  return Status::Ok();
}

Result<std::string> SqliteJobStore::GetClusterId() {
  return GetClusterRow("cluster_id", "the cluster id");
}

Status SqliteJobStore::PutClusterId(const std::string& id) {
  return PutClusterRow("cluster_id", id, "the cluster id");
}

// Cluster values share the cluster id's table under "value:<key>", so the two cannot collide.
Result<std::string> SqliteJobStore::GetClusterValue(const std::string& key) {
  return GetClusterRow("value:" + key, "the cluster value " + key);
}

Status SqliteJobStore::PutClusterValue(const std::string& key, const std::string& value) {
  return PutClusterRow("value:" + key, value, "the cluster value " + key);
}

Result<std::vector<std::pair<std::string, std::string>>> SqliteJobStore::ListClusterValues(
    const std::string& prefix) {
  // A range on the primary key: [value:<prefix>, value:<prefix> + 0xff), keys being ASCII.
  TRAINLET_ASSIGN_OR_RETURN(
      sqlite3_stmt * s,
      Prepare("SELECT key, value FROM cluster WHERE key >= ?1 AND key < ?2 ORDER BY key"));
  StatementUse use(s);
  const std::string begin = "value:" + prefix;
  BindText(s, 1, begin);
  BindText(s, 2, begin + "\xff");
  std::vector<std::pair<std::string, std::string>> out;
  int rc;
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
    out.emplace_back(ColumnText(s, 0).substr(6), ColumnText(s, 1));  // less "value:"
  }
  if (rc != SQLITE_DONE) return Error("listing the cluster values " + prefix + "*");
  return out;
}

Status SqliteJobStore::DeleteClusterValue(const std::string& key) {
  TRAINLET_ASSIGN_OR_RETURN(sqlite3_stmt * s, Prepare("DELETE FROM cluster WHERE key = ?1"));
  StatementUse use(s);
  BindText(s, 1, "value:" + key);
  if (sqlite3_step(s) != SQLITE_DONE) return Error("deleting the cluster value " + key);
  return Status::Ok();
}

Status SqliteJobStore::PutQueueObject(const QueueObjectRecord& object) {
  TRAINLET_ASSIGN_OR_RETURN(sqlite3_stmt * s, Prepare(kUpsertQueueObject));
  StatementUse use(s);
  BindText(s, 1, object.kind);
  BindText(s, 2, object.namespace_);
  BindText(s, 3, object.name);
  BindText(s, 4, object.yaml);
  if (sqlite3_step(s) != SQLITE_DONE) return Error("storing " + object.kind + "/" + object.name);
  return Status::Ok();
}

Status SqliteJobStore::DeleteQueueObject(const std::string& kind, const std::string& namespace_,
                                         const std::string& name) {
  TRAINLET_ASSIGN_OR_RETURN(sqlite3_stmt * s, Prepare(kDeleteQueueObject));
  StatementUse use(s);
  BindText(s, 1, kind);
  BindText(s, 2, namespace_);
  BindText(s, 3, name);
  if (sqlite3_step(s) != SQLITE_DONE) return Error("deleting " + kind + "/" + name);
  if (sqlite3_changes(db_.get()) == 0) return NotFoundError(kind + "/" + name + " not found");
  return Status::Ok();
}

Result<std::vector<QueueObjectRecord>> SqliteJobStore::ListQueueObjects() {
  TRAINLET_ASSIGN_OR_RETURN(sqlite3_stmt * s, Prepare(kSelectQueueObjects));
  StatementUse use(s);
  std::vector<QueueObjectRecord> out;
  int rc;
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
    out.push_back({ColumnText(s, 0), ColumnText(s, 1), ColumnText(s, 2), ColumnText(s, 3)});
  }
  if (rc != SQLITE_DONE) return Error("listing queue objects");
  return out;
}

Result<std::unique_ptr<JobStore>> JobStore::Open(const std::string& state_dir) {
  TRAINLET_ASSIGN_OR_RETURN(auto store, SqliteJobStore::Open(state_dir));
  return std::unique_ptr<JobStore>(std::move(store));
}

}  // namespace trainlet::coordinator
