#include "coordinator/etcd_job_store.h"

#include <algorithm>
#include <limits>
#include <tuple>
#include <utility>

#include "coordinator/stored_status.h"
#include "trainlet/v1/store.pb.h"

namespace trainlet::coordinator {

namespace {

std::string Escape(const std::string& name) {
  std::string out;
  for (char c : name) {
    if (c == '%') {
      out += "%25";
    } else if (c == '/') {
      out += "%2F";
    } else {
      out.push_back(c);
    }
  }
  return out;
}

std::string Unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s.compare(i, 3, "%25") == 0) {
      out.push_back('%');
      i += 2;
    } else if (s.compare(i, 3, "%2F") == 0) {
      out.push_back('/');
      i += 2;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

std::string Serialize(const google::protobuf::MessageLite& m) {
  std::string out;
  TRAINLET_CHECK(m.SerializeToString(&out));
  return out;
}

}  // namespace

EtcdCompare EtcdJobStore::CompareOf(const Precondition& p) {
  EtcdCompare c;
  c.key = p.key;
  c.target = EtcdCompare::Target::kCreate;
  c.result = p.kind == Precondition::Kind::kAbsent ? EtcdCompare::Result::kEqual
                                                   : EtcdCompare::Result::kGreater;
  c.number = 0;
  return c;
}

Status EtcdJobStore::Violation(const Precondition& p) {
  if (p.kind == Precondition::Kind::kAbsent) {
    return Status(ErrorCode::kExists, p.what + " already exists");
  }
  return NotFoundError(p.what + " not found");
}

EtcdJobStore::EtcdJobStore(EtcdStoreConfig config, std::unique_ptr<EtcdClient> client)
    : config_(std::move(config)),
      prefix_(config_.prefix.empty() || config_.prefix.back() == '/' ? config_.prefix
                                                                     : config_.prefix + "/"),
      client_(std::move(client)) {}

EtcdJobStore::~EtcdJobStore() = default;

Result<std::unique_ptr<EtcdJobStore>> EtcdJobStore::Open(EtcdStoreConfig config) {
  if (config.prefix.empty() || config.prefix[0] != '/') {
    return InvalidError("prefix: \"" + config.prefix + "\": must start with '/'");
  }
  if (config.max_txn_ops < 4) return InvalidError("max_txn_ops: must be at least 4");
  TRAINLET_ASSIGN_OR_RETURN(auto client, EtcdClient::Create(config.client));
  std::unique_ptr<EtcdJobStore> store(new EtcdJobStore(std::move(config), std::move(client)));
  TRAINLET_RETURN_IF_ERROR(store->Init());
  return store;
}

Status EtcdJobStore::Init() {
  const std::string key = prefix_ + "schema";
  TRAINLET_ASSIGN_OR_RETURN(auto kvs, client_->Range(key, ""));
  if (!kvs.empty()) {
    int version = 0;
    try {
      version = std::stoi(kvs[0].value);
    } catch (const std::exception&) {
      return IoError(location() + ": " + key + ": \"" + kvs[0].value + "\" is not a version");
    }
    if (version > kSchemaVersion) {
      return InvalidError(location() + ": layout version " + std::to_string(version) +
                          " was written by a newer trainlet; this one reads up to version " +
                          std::to_string(kSchemaVersion));
    }
    return Status::Ok();
  }
  // First use of the prefix. Two coordinators starting at once both write "1": harmless.
  Status s = Write({}, {EtcdOp::Put(key, std::to_string(kSchemaVersion))});
  return s;
}

std::string EtcdJobStore::location() const {
  return "etcd " + client_->endpoints() + " (prefix " + prefix_ + ")";
}

Status EtcdJobStore::CheckSpace(uint64_t) const { return Status::Ok(); }

std::string EtcdJobStore::JobKey(const std::string& name, const char* field) const {
  return prefix_ + "jobs/" + Escape(name) + "/" + field;
}

std::string EtcdJobStore::RuntimeKey(const std::string& kind, const std::string& name) const {
  return prefix_ + "runtimes/" + Escape(kind) + "/" + Escape(name);
}

std::string EtcdJobStore::CordonKey(const std::string& node) const {
  return prefix_ + "cordons/" + Escape(node);
}

std::string EtcdJobStore::QueueKey(const std::string& kind, const std::string& namespace_,
                                   const std::string& name) const {
  return prefix_ + "queues/" + Escape(kind) + "/" + Escape(namespace_) + "/" + Escape(name);
}

Status EtcdJobStore::CheckLimits(size_t compares, const std::vector<EtcdOp>& ops) const {
  const size_t n = std::max(compares + (fence_ ? 1 : 0), ops.size());
  if (n > config_.max_txn_ops) {
    return InvalidError(location() + ": the transaction needs " + std::to_string(n) +
                        " operations; etcd takes at most " + std::to_string(config_.max_txn_ops) +
                        " in one (etcd's --max-txn-ops, the store's max_txn_ops): nothing was "
                        "written");
  }
  // Base64 grows bytes by 4/3; each op and compare adds JSON around it.
  size_t bytes = 0;
  for (const auto& op : ops) bytes += (op.key.size() + op.value.size()) * 4 / 3 + 64;
  bytes += compares * 128;
  if (bytes > config_.max_request_bytes) {
    return InvalidError(location() + ": the transaction is about " + std::to_string(bytes / 1024) +
                        " KiB; etcd takes at most " +
                        std::to_string(config_.max_request_bytes / 1024) +
                        " KiB in one request (etcd's --max-request-bytes, the store's "
                        "max_request_bytes): nothing was written");
  }
  return Status::Ok();
}

Status EtcdJobStore::Commit(const std::vector<Precondition>& checks,
                            const std::vector<EtcdOp>& ops) {
  TRAINLET_RETURN_IF_ERROR(CheckLimits(checks.size(), ops));
  std::vector<EtcdCompare> compares;
  std::vector<EtcdOp> failure;  // what tells a failed check from a lost fence
  for (const auto& p : checks) {
    compares.push_back(CompareOf(p));
    failure.push_back(EtcdOp::Range(p.key));
  }
  // The one place a fencing compare joins every write.
  if (fence_) {
    compares.push_back(*fence_);
    failure.push_back(EtcdOp::Range(fence_->key));
  }
  TRAINLET_ASSIGN_OR_RETURN(EtcdTxnResult r, client_->Txn(compares, ops, failure));
  if (r.succeeded) return Status::Ok();
  for (size_t i = 0; i < checks.size() && i < r.ranges.size(); ++i) {
    const bool exists = !r.ranges[i].empty();
    if (exists != (checks[i].kind == Precondition::Kind::kPresent)) return Violation(checks[i]);
  }
  fence_lost_ = true;
  return UnavailableError(location() + ": not the leader: the fence on " +
                          (fence_ ? fence_->key : std::string("?")) +
                          " no longer holds (another coordinator leads); nothing was written");
}

Status EtcdJobStore::Write(const std::vector<Precondition>& pre, const std::vector<EtcdOp>& ops) {
  if (pending_.empty()) return Commit(pre, ops);
  Pending& tx = pending_.back();
  for (const auto& p : pre) {
    auto it = tx.writes.find(p.key);
    if (it != tx.writes.end()) {  // decided by this transaction's own writes
      if (it->second.has_value() != (p.kind == Precondition::Kind::kPresent)) return Violation(p);
      continue;
    }
    // Checked by etcd at commit, as a compare: no round trip per record (an apply of many jobs
    // costs one txn).
    const bool known = std::any_of(tx.checks.begin(), tx.checks.end(), [&](const auto& c) {
      return c.key == p.key && c.kind == p.kind;
    });
    if (!known) tx.checks.push_back(p);  // one compare per key: each counts against the limit
  }
  for (const auto& op : ops) {
    if (op.kind == EtcdOp::Kind::kPut) {
      tx.writes[op.key] = op.value;
    } else {
      tx.writes[op.key] = std::nullopt;
    }
  }
  return Status::Ok();
}

Status EtcdJobStore::Transaction(const std::function<Status()>& body) {
  // Each level starts as a copy of the one around it, so an inner failure drops only its own.
  pending_.push_back(pending_.empty() ? Pending{} : pending_.back());
  struct Pop {
    std::vector<Pending>& stack;
    ~Pop() { stack.pop_back(); }
  } pop{pending_};
  Status st = body();
  if (!st.ok()) return st;
  if (pending_.size() > 1) {
    pending_[pending_.size() - 2] = pending_.back();  // merged into the enclosing level
    return Status::Ok();
  }
  const Pending& tx = pending_.back();
  if (tx.writes.empty()) return Status::Ok();
  std::vector<EtcdOp> ops;
  for (const auto& [key, value] : tx.writes) {
    ops.push_back(value ? EtcdOp::Put(key, *value) : EtcdOp::Delete(key));
  }
  // Sent with no transaction open, whatever the outcome.
  std::vector<Precondition> checks = tx.checks;
  pending_.back() = Pending{};
  return Commit(checks, ops);
}

Result<std::vector<EtcdKeyValue>> EtcdJobStore::Read(const std::string& begin,
                                                     const std::string& end) {
  TRAINLET_ASSIGN_OR_RETURN(auto kvs, client_->Range(begin, end));
  if (pending_.empty()) return kvs;
  std::map<std::string, EtcdKeyValue> merged;
  for (auto& kv : kvs) merged.emplace(kv.key, std::move(kv));
  for (const auto& [key, value] : pending_.back().writes) {
    if (key < begin || (!end.empty() && key >= end) || (end.empty() && key != begin)) continue;
    if (!value) {
      merged.erase(key);
      continue;
    }
    EtcdKeyValue& kv = merged[key];
    kv.key = key;
    kv.value = *value;
    // Not yet created: it sorts after everything committed.
    if (kv.create_revision == 0) kv.create_revision = std::numeric_limits<int64_t>::max();
  }
  std::vector<EtcdKeyValue> out;
  for (auto& [key, kv] : merged) out.push_back(std::move(kv));
  return out;
}

Status EtcdJobStore::CreateJob(const JobRecord& job) {
  v1::StoredJobMeta meta;
  meta.set_runtime_kind(job.runtime_kind);
  meta.set_runtime_name(job.runtime_name);
  meta.set_runtime_yaml(job.runtime_yaml);
  if (!pending_.empty()) meta.set_ordinal(pending_.back().next_ordinal);
  const std::string meta_key = JobKey(job.name, "meta");
  TRAINLET_RETURN_IF_ERROR(Write(
      {{Precondition::Kind::kAbsent, meta_key, "trainjob/" + job.name}},
      {EtcdOp::Put(meta_key, Serialize(meta)), EtcdOp::Put(JobKey(job.name, "spec"), job.spec_yaml),
       EtcdOp::Put(JobKey(job.name, "status"), Serialize(job.status))}));
  if (!pending_.empty()) ++pending_.back().next_ordinal;
  return Status::Ok();
}

Status EtcdJobStore::UpdateStatus(const std::string& name, const v1::JobStatus& status) {
  return Write({{Precondition::Kind::kPresent, JobKey(name, "meta"), "trainjob/" + name}},
               {EtcdOp::Put(JobKey(name, "status"), Serialize(status))});
}

Status EtcdJobStore::UpdateSpec(const std::string& name, const std::string& spec_yaml) {
  return Write({{Precondition::Kind::kPresent, JobKey(name, "meta"), "trainjob/" + name}},
               {EtcdOp::Put(JobKey(name, "spec"), spec_yaml)});
}

Status EtcdJobStore::DeleteJob(const std::string& name) {
  return Write({{Precondition::Kind::kPresent, JobKey(name, "meta"), "trainjob/" + name}},
               {EtcdOp::Delete(JobKey(name, "meta")), EtcdOp::Delete(JobKey(name, "spec")),
                EtcdOp::Delete(JobKey(name, "status"))});
}

namespace {

// The keys of one job, gathered from a range over jobs/.
struct JobKeys {
  const EtcdKeyValue* meta = nullptr;
  const EtcdKeyValue* spec = nullptr;
  const EtcdKeyValue* status = nullptr;
};

Result<JobRecord> DecodeJob(const std::string& where, const std::string& name, const JobKeys& k) {
  JobRecord job;
  job.name = name;
  if (k.spec == nullptr || k.status == nullptr) {
    return IoError(where + ": trainjob/" + name + ": its spec or status key is missing");
  }
  v1::StoredJobMeta meta;
  if (!meta.ParseFromString(k.meta->value)) {
    return IoError(where + ": trainjob/" + name + ": stored meta is not a valid StoredJobMeta");
  }
  job.runtime_kind = meta.runtime_kind();
  job.runtime_name = meta.runtime_name();
  job.runtime_yaml = meta.runtime_yaml();
  job.spec_yaml = k.spec->value;
  if (!job.status.ParseFromString(k.status->value)) {
    return IoError(where + ": trainjob/" + name + ": stored status is not a valid JobStatus (" +
                   std::to_string(k.status->value.size()) + " bytes)");
  }
  if (Status s = UpgradeStoredStatus(job.status); !s.ok()) {
    return IoError(where + ": trainjob/" + name + ": stored status: " + s.message());
  }
  return job;
}

}  // namespace

Result<std::optional<JobRecord>> EtcdJobStore::GetJob(const std::string& name) {
  const std::string begin = prefix_ + "jobs/" + Escape(name) + "/";
  TRAINLET_ASSIGN_OR_RETURN(auto kvs, Read(begin, EtcdClient::PrefixEnd(begin)));
  JobKeys keys;
  for (const auto& kv : kvs) {
    const std::string field = kv.key.substr(begin.size());
    if (field == "meta") keys.meta = &kv;
    if (field == "spec") keys.spec = &kv;
    if (field == "status") keys.status = &kv;
  }
  if (keys.meta == nullptr) return std::optional<JobRecord>();
  TRAINLET_ASSIGN_OR_RETURN(JobRecord job, DecodeJob(location(), name, keys));
  return std::optional<JobRecord>(std::move(job));
}

Result<std::vector<JobRecord>> EtcdJobStore::ListJobs() {
  const std::string begin = prefix_ + "jobs/";
  TRAINLET_ASSIGN_OR_RETURN(auto kvs, Read(begin, EtcdClient::PrefixEnd(begin)));
  std::map<std::string, JobKeys> by_name;  // escaped name
  for (const auto& kv : kvs) {
    const std::string rest = kv.key.substr(begin.size());
    const size_t slash = rest.rfind('/');
    if (slash == std::string::npos) continue;
    JobKeys& keys = by_name[rest.substr(0, slash)];
    const std::string field = rest.substr(slash + 1);
    if (field == "meta") keys.meta = &kv;
    if (field == "spec") keys.spec = &kv;
    if (field == "status") keys.status = &kv;
  }
  struct Ordered {
    int64_t revision;
    uint32_t ordinal;
    JobRecord job;
  };
  std::vector<Ordered> ordered;
  for (const auto& [escaped, keys] : by_name) {
    if (keys.meta == nullptr) continue;  // a half-written job cannot exist: every write is a txn
    TRAINLET_ASSIGN_OR_RETURN(JobRecord job, DecodeJob(location(), Unescape(escaped), keys));
    v1::StoredJobMeta meta;
    (void)meta.ParseFromString(keys.meta->value);  // DecodeJob checked it
    ordered.push_back({keys.meta->create_revision, meta.ordinal(), std::move(job)});
  }
  std::sort(ordered.begin(), ordered.end(), [](const Ordered& a, const Ordered& b) {
    return std::tie(a.revision, a.ordinal) < std::tie(b.revision, b.ordinal);
  });
  std::vector<JobRecord> jobs;
  for (auto& o : ordered) jobs.push_back(std::move(o.job));
  return jobs;
}

Status EtcdJobStore::PutRuntime(const RuntimeRecord& runtime) {
  return Write({}, {EtcdOp::Put(RuntimeKey(runtime.kind, runtime.name), runtime.yaml)});
}

Result<std::optional<RuntimeRecord>> EtcdJobStore::GetRuntime(const std::string& kind,
                                                              const std::string& name) {
  TRAINLET_ASSIGN_OR_RETURN(auto kvs, Read(RuntimeKey(kind, name), ""));
  if (kvs.empty()) return std::optional<RuntimeRecord>();
  return std::optional<RuntimeRecord>(RuntimeRecord{kind, name, kvs[0].value});
}

Result<std::vector<RuntimeRecord>> EtcdJobStore::ListRuntimes() {
  const std::string begin = prefix_ + "runtimes/";
  TRAINLET_ASSIGN_OR_RETURN(auto kvs, Read(begin, EtcdClient::PrefixEnd(begin)));
  std::vector<RuntimeRecord> out;
  for (const auto& kv : kvs) {
    const std::string rest = kv.key.substr(begin.size());
    const size_t slash = rest.find('/');
    if (slash == std::string::npos) continue;
    out.push_back({Unescape(rest.substr(0, slash)), Unescape(rest.substr(slash + 1)), kv.value});
  }
  std::sort(out.begin(), out.end(), [](const RuntimeRecord& a, const RuntimeRecord& b) {
    return std::tie(a.kind, a.name) < std::tie(b.kind, b.name);
  });
  return out;
}

Result<std::string> EtcdJobStore::GetClusterId() {
  TRAINLET_ASSIGN_OR_RETURN(auto kvs, Read(prefix_ + "cluster-id", ""));
  return kvs.empty() ? std::string() : kvs[0].value;
}

Status EtcdJobStore::PutClusterId(const std::string& id) {
  return Write({}, {EtcdOp::Put(prefix_ + "cluster-id", id)});
}

Result<std::string> EtcdJobStore::GetClusterValue(const std::string& key) {
  TRAINLET_ASSIGN_OR_RETURN(auto kvs, Read(prefix_ + "cluster-values/" + key, ""));
  return kvs.empty() ? std::string() : kvs[0].value;
}

Status EtcdJobStore::PutClusterValue(const std::string& key, const std::string& value) {
  return Write({}, {EtcdOp::Put(prefix_ + "cluster-values/" + key, value)});
}

Result<std::vector<std::pair<std::string, std::string>>> EtcdJobStore::ListClusterValues(
    const std::string& prefix) {
  const std::string values = prefix_ + "cluster-values/";
  TRAINLET_ASSIGN_OR_RETURN(auto kvs,
                            Read(values + prefix, EtcdClient::PrefixEnd(values + prefix)));
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& kv : kvs) out.emplace_back(kv.key.substr(values.size()), kv.value);
  std::sort(out.begin(), out.end());
  return out;
}

Status EtcdJobStore::DeleteClusterValue(const std::string& key) {
  return Write({}, {EtcdOp::Delete(prefix_ + "cluster-values/" + key)});
}

Status EtcdJobStore::PutNodeCordon(const NodeCordonRecord& cordon) {
  v1::StoredNodeCordon stored;
  stored.set_reason(cordon.reason);
  stored.set_drain(cordon.drain);
  stored.set_since_unix_ms(cordon.since_unix_ms);
  return Write({}, {EtcdOp::Put(CordonKey(cordon.node), Serialize(stored))});
}

Status EtcdJobStore::DeleteNodeCordon(const std::string& node) {
  return Write({}, {EtcdOp::Delete(CordonKey(node))});
}

Result<std::vector<NodeCordonRecord>> EtcdJobStore::ListNodeCordons() {
  const std::string begin = prefix_ + "cordons/";
  TRAINLET_ASSIGN_OR_RETURN(auto kvs, Read(begin, EtcdClient::PrefixEnd(begin)));
  std::vector<NodeCordonRecord> out;
  for (const auto& kv : kvs) {
    v1::StoredNodeCordon stored;
    const std::string node = Unescape(kv.key.substr(begin.size()));
    if (!stored.ParseFromString(kv.value)) {
      return IoError(location() + ": the cordon of node " + node + " is not a StoredNodeCordon");
    }
    out.push_back({node, stored.reason(), stored.drain(), stored.since_unix_ms()});
  }
  std::sort(out.begin(), out.end(),
            [](const NodeCordonRecord& a, const NodeCordonRecord& b) { return a.node < b.node; });
  return out;
}

Status EtcdJobStore::PutQueueObject(const QueueObjectRecord& object) {
  return Write({},
               {EtcdOp::Put(QueueKey(object.kind, object.namespace_, object.name), object.yaml)});
}

Status EtcdJobStore::DeleteQueueObject(const std::string& kind, const std::string& namespace_,
                                       const std::string& name) {
  const std::string key = QueueKey(kind, namespace_, name);
  return Write({{Precondition::Kind::kPresent, key, kind + "/" + name}}, {EtcdOp::Delete(key)});
}

Result<std::vector<QueueObjectRecord>> EtcdJobStore::ListQueueObjects() {
  const std::string begin = prefix_ + "queues/";
  TRAINLET_ASSIGN_OR_RETURN(auto kvs, Read(begin, EtcdClient::PrefixEnd(begin)));
  std::vector<QueueObjectRecord> out;
  for (const auto& kv : kvs) {
    const std::string rest = kv.key.substr(begin.size());
    const size_t a = rest.find('/');
    const size_t b = a == std::string::npos ? a : rest.find('/', a + 1);
    if (b == std::string::npos) continue;
    out.push_back({Unescape(rest.substr(0, a)), Unescape(rest.substr(a + 1, b - a - 1)),
                   Unescape(rest.substr(b + 1)), kv.value});
  }
  std::sort(out.begin(), out.end(), [](const QueueObjectRecord& x, const QueueObjectRecord& y) {
    return std::tie(x.kind, x.namespace_, x.name) < std::tie(y.kind, y.namespace_, y.name);
  });
  return out;
}

Status EtcdJobStore::DeleteRecords() {
  std::vector<EtcdOp> ops;
  for (const char* table : {"jobs/", "runtimes/", "cordons/", "queues/",
                            "cluster-values/missed-purge/", "cluster-values/queue-deleting/"}) {
    EtcdOp all = EtcdOp::Delete(prefix_ + table);
    all.range_end = EtcdClient::PrefixEnd(prefix_ + table);
    ops.push_back(std::move(all));
  }
  return Commit({}, ops);
}

Result<int64_t> EtcdJobStore::CountKeys() {
  TRAINLET_ASSIGN_OR_RETURN(auto kvs, client_->Range(prefix_, EtcdClient::PrefixEnd(prefix_)));
  return static_cast<int64_t>(kvs.size());
}

}  // namespace trainlet::coordinator
