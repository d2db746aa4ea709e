// `trainlet-coordinator --migrate-store`: copies a job store (SQLite) into an etcd store, record
// by record (jobs with their status, finished or running; runtimes; node cordons; Kueue's queue
// objects; the cluster's id and its cluster values, such as fair sharing's history and the purge
// tombstones of missed_purges.h), then reads the target back and checks every record.
//
// Idempotent: a target that already holds exactly the source's records is left as it is. A target
// with other records is refused (kExists, with its counts) unless `force`, which replaces them.
// Each write is an etcd txn of up to the store's max_txn_ops; jobs keep their order. A run cut
// short leaves a partial copy, which the next run refuses without --force.
//
// Run with no coordinator writing to either store.
#pragma once

#include <cstddef>
#include <string>

#include "common/status.h"
#include "coordinator/etcd_job_store.h"
#include "coordinator/job_store.h"

namespace trainlet::coordinator {

struct MigrationReport {
  size_t jobs = 0;
  size_t runtimes = 0;
  size_t cordons = 0;
  bool already_migrated = false;  // the target held the same records: nothing was written
  size_t queue_objects = 0;       // Kueue's ClusterQueues, LocalQueues, ...
};

Result<MigrationReport> MigrateStore(JobStore& from, EtcdJobStore& to, bool force);

// The command `trainlet-coordinator --migrate-store --from DIR --to FILE [--force]`: opens the
// SQLite store in DIR (which must hold one) and the etcd store FILE's keys name
// (LoadJobStoreConfig), migrates, and returns the line to print. Errors name the flag.
Result<std::string> RunStoreMigration(const std::string& from_state_dir,
                                      const std::string& to_config_file, bool force);

// "" when `a` and `b` hold the same records, else the first difference ("trainjob/x: status
// differs"). Used by MigrateStore and its tests.
std::string FirstDifference(JobStore& a, JobStore& b);

}  // namespace trainlet::coordinator
