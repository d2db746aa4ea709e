#include "coordinator/store_migration.h"

#include <algorithm>
#include <filesystem>
#include <tuple>

#include "coordinator/job_store_config.h"
#include "coordinator/sqlite_job_store.h"

namespace trainlet::coordinator {

namespace {

// ", 3 queue objects"; "" for none, so stores without Kueue objects read as before.
std::string QueueCount(size_t n) {
  return n == 0 ? std::string() : ", " + std::to_string(n) + " queue objects";
}

struct Snapshot {
  std::vector<JobRecord> jobs;
  std::vector<RuntimeRecord> runtimes;
  std::vector<NodeCordonRecord> cordons;
  std::vector<QueueObjectRecord> queues;
  bool empty() const {
    return jobs.empty() && runtimes.empty() && cordons.empty() && queues.empty();
  }
  std::string Counts() const {
    return std::to_string(jobs.size()) + " jobs, " + std::to_string(runtimes.size()) +
           " runtimes, " + std::to_string(cordons.size()) + " cordons" + QueueCount(queues.size());
  }
};

Result<Snapshot> Read(JobStore& store) {
  Snapshot s;
  TRAINLET_ASSIGN_OR_RETURN(s.jobs, store.ListJobs());
  TRAINLET_ASSIGN_OR_RETURN(s.runtimes, store.ListRuntimes());
  TRAINLET_ASSIGN_OR_RETURN(s.cordons, store.ListNodeCordons());
  TRAINLET_ASSIGN_OR_RETURN(s.queues, store.ListQueueObjects());
  return s;
}

std::string Difference(const Snapshot& a, const Snapshot& b) {
  if (a.jobs.size() != b.jobs.size() || a.runtimes.size() != b.runtimes.size() ||
      a.cordons.size() != b.cordons.size() || a.queues.size() != b.queues.size()) {
    return "counts differ: " + a.Counts() + " against " + b.Counts();
  }
  for (size_t i = 0; i < a.jobs.size(); ++i) {
    const JobRecord& x = a.jobs[i];
    const JobRecord& y = b.jobs[i];
    if (x.name != y.name) return "job " + std::to_string(i) + ": " + x.name + " against " + y.name;
    if (std::tie(x.spec_yaml, x.runtime_kind, x.runtime_name, x.runtime_yaml) !=
        std::tie(y.spec_yaml, y.runtime_kind, y.runtime_name, y.runtime_yaml)) {
      return "trainjob/" + x.name + ": spec or runtime differs";
    }
    if (x.status.SerializeAsString() != y.status.SerializeAsString()) {
      return "trainjob/" + x.name + ": status differs";
    }
  }
  for (size_t i = 0; i < a.runtimes.size(); ++i) {
    const RuntimeRecord& x = a.runtimes[i];
    const RuntimeRecord& y = b.runtimes[i];
    if (std::tie(x.kind, x.name, x.yaml) != std::tie(y.kind, y.name, y.yaml)) {
      return x.kind + "/" + x.name + " differs";
    }
  }
  for (size_t i = 0; i < a.cordons.size(); ++i) {
    const NodeCordonRecord& x = a.cordons[i];
    const NodeCordonRecord& y = b.cordons[i];
    if (std::tie(x.node, x.reason, x.drain, x.since_unix_ms) !=
        std::tie(y.node, y.reason, y.drain, y.since_unix_ms)) {
      return "the cordon of node " + x.node + " differs";
    }
  }
  for (size_t i = 0; i < a.queues.size(); ++i) {
    if (!(a.queues[i] == b.queues[i])) {
      return a.queues[i].kind + "/" + a.queues[i].name + " differs";
    }
  }
  return "";
}

// Writes `n` records per transaction, in order, each with `write(i)`.
Status Chunked(EtcdJobStore& to, size_t count, size_t per_txn,
               const std::function<Status(size_t)>& write) {
  for (size_t begin = 0; begin < count; begin += per_txn) {
    TRAINLET_RETURN_IF_ERROR(to.Transaction([&]() -> Status {
      for (size_t i = begin; i < std::min(count, begin + per_txn); ++i) {
        TRAINLET_RETURN_IF_ERROR(write(i));
      }
      return Status::Ok();
    }));
  }
  return Status::Ok();
}

}  // namespace

std::string FirstDifference(JobStore& a, JobStore& b) {
  auto x = Read(a);
  if (!x.ok()) return a.location() + ": " + x.status().message();
  auto y = Read(b);
  if (!y.ok()) return b.location() + ": " + y.status().message();
  return Difference(*x, *y);
}

Result<MigrationReport> MigrateStore(JobStore& from, EtcdJobStore& to, bool force) {
  TRAINLET_ASSIGN_OR_RETURN(Snapshot source, Read(from));
  TRAINLET_ASSIGN_OR_RETURN(Snapshot target, Read(to));
  MigrationReport report{source.jobs.size(), source.runtimes.size(), source.cordons.size(), false,
                         source.queues.size()};
  if (!target.empty()) {
    if (Difference(source, target).empty()) {
      report.already_migrated = true;
      return report;
    }
    if (!force) {
      return Status(ErrorCode::kExists, to.location() + " already holds " + target.Counts() +
                                            ", not the same as " + from.location() + " (" +
                                            source.Counts() +
                                            "); --force replaces them with the source's");
    }
    TRAINLET_RETURN_IF_ERROR(to.DeleteRecords());
  }
  // A job is three keys and one compare; the rest one key each.
  const size_t ops = to.max_txn_ops();
  TRAINLET_RETURN_IF_ERROR(Chunked(to, source.runtimes.size(), ops,
                                   [&](size_t i) { return to.PutRuntime(source.runtimes[i]); }));
  TRAINLET_RETURN_IF_ERROR(Chunked(to, source.cordons.size(), ops,
                                   [&](size_t i) { return to.PutNodeCordon(source.cordons[i]); }));
  TRAINLET_RETURN_IF_ERROR(Chunked(to, source.queues.size(), ops,
                                   [&](size_t i) { return to.PutQueueObject(source.queues[i]); }));
  TRAINLET_RETURN_IF_ERROR(Chunked(to, source.jobs.size(), std::max<size_t>(1, (ops - 1) / 3),
                                   [&](size_t i) { return to.CreateJob(source.jobs[i]); }));
  TRAINLET_ASSIGN_OR_RETURN(Snapshot copied, Read(to));
  if (std::string diff = Difference(source, copied); !diff.empty()) {
    return IoError("verifying " + to.location() + " after the copy: " + diff);
  }
  // The cluster's identity goes with it: the agents keep the source's (issue 19, defect 3).
  TRAINLET_ASSIGN_OR_RETURN(std::string id, from.GetClusterId());
  if (!id.empty()) TRAINLET_RETURN_IF_ERROR(to.PutClusterId(id));
  // And every cluster value: fair sharing's memory of who used the cohorts
  // (fair_share_history.h), and the purges that wait for nodes away at a delete
  // (missed_purges_tombstone.h), so the data of jobs deleted before the move still goes.
  TRAINLET_ASSIGN_OR_RETURN(auto values, from.ListClusterValues(""));
  TRAINLET_RETURN_IF_ERROR(Chunked(to, values.size(), ops, [&](size_t i) {
    return to.PutClusterValue(values[i].first, values[i].second);
  }));
  return report;
}

Result<std::string> RunStoreMigration(const std::string& from_state_dir,
                                      const std::string& to_config_file, bool force) {
  if (from_state_dir.empty()) return InvalidError("--from: the SQLite state dir to copy");
  if (to_config_file.empty()) return InvalidError("--to: the config file naming the etcd store");
  std::error_code ec;
  if (!std::filesystem::is_regular_file(
          std::filesystem::path(from_state_dir) / SqliteJobStore::kFileName, ec)) {
    return NotFoundError("--from " + from_state_dir + ": holds no " + SqliteJobStore::kFileName);
  }
  auto from = SqliteJobStore::Open(from_state_dir);
  if (!from.ok()) return Status(from.status().code(), "--from: " + from.status().message());
  auto config = LoadJobStoreConfig(to_config_file);
  if (!config.ok()) return Status(config.status().code(), "--to " + config.status().message());
  EtcdStoreConfig etcd = config->etcd;
  etcd.client.endpoints = SplitEndpoints(config->etcd_endpoints);
  auto to = EtcdJobStore::Open(etcd);
  if (!to.ok()) return Status(to.status().code(), "--to: " + to.status().message());
  TRAINLET_ASSIGN_OR_RETURN(MigrationReport r, MigrateStore(**from, **to, force));
  const std::string counts = std::to_string(r.jobs) + " jobs, " + std::to_string(r.runtimes) +
                             " runtimes, " + std::to_string(r.cordons) + " cordons" +
                             QueueCount(r.queue_objects);
  if (r.already_migrated) {
    return (*to)->location() + " already holds the " + counts + " of " + (*from)->location() +
           ": nothing to do";
  }
  return "copied " + counts + " from " + (*from)->location() + " to " + (*to)->location() +
         ", and verified each record";
}

}  // namespace trainlet::coordinator
