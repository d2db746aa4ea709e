// Which job store the coordinator uses, and opening it: `store: sqlite` (the default, a database
// under the state dir) or `store: etcd` (keys under a prefix of an etcd cluster). The keys are
// documented in docs/config.md; errors name them.
#pragma once

#include <memory>
#include <string>

#include "common/status.h"
#include "coordinator/etcd_job_store.h"
#include "coordinator/job_store.h"

namespace trainlet::coordinator {

struct JobStoreConfig {
  std::string backend = "sqlite";  // "sqlite" or "etcd" (config key `store`)
  std::string state_dir;           // sqlite: the database's directory
  std::string etcd_endpoints;      // etcd: client URLs, comma-separated
  EtcdStoreConfig etcd;            // etcd: the rest (endpoints filled from etcd_endpoints)
};

// "http://a:2379, http://b:2379" -> {"http://a:2379", "http://b:2379"}; blanks dropped.
std::vector<std::string> SplitEndpoints(const std::string& list);

// Checks the config, naming the key at fault ("etcd_endpoints: required with store: etcd"), then
// opens the store. Errors from opening as the backend's Open.
Result<std::unique_ptr<JobStore>> OpenJobStore(const JobStoreConfig& config);

// The store keys of a coordinator config file (`store`, `etcd_*`; its other keys are ignored):
// what `--migrate-store --to FILE` reads. kInvalid naming the file and the key.
Result<JobStoreConfig> LoadJobStoreConfig(const std::string& yaml_file);

}  // namespace trainlet::coordinator
