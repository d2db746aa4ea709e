#include "coordinator/job_store_config.h"

#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <utility>

#include "coordinator/sqlite_job_store.h"

namespace trainlet::coordinator {

std::vector<std::string> SplitEndpoints(const std::string& list) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    if (comma == std::string::npos) comma = list.size();
    std::string item = list.substr(start, comma - start);
    const size_t b = item.find_first_not_of(" \t");
    const size_t e = item.find_last_not_of(" \t");
    if (b != std::string::npos) out.push_back(item.substr(b, e - b + 1));
    start = comma + 1;
  }
  return out;
}

namespace {

Status CheckEtcdConfig(const JobStoreConfig& config) {
  const auto endpoints = SplitEndpoints(config.etcd_endpoints);
  if (endpoints.empty()) return InvalidError("etcd_endpoints: required with store: etcd");
  for (const auto& e : endpoints) {
    if (e.rfind("http://", 0) != 0 && e.rfind("https://", 0) != 0) {
      return InvalidError("etcd_endpoints: \"" + e +
                          "\": must be http://host:port or https://host:port");
    }
  }
  const EtcdClientConfig& c = config.etcd.client;
  for (const auto& [key, path] :
       {std::pair<const char*, const std::string*>{"etcd_ca_file", &c.ca_file},
        {"etcd_cert_file", &c.cert_file},
        {"etcd_key_file", &c.key_file}}) {
    std::error_code ec;
    if (!path->empty() && !std::filesystem::is_regular_file(*path, ec)) {
      return InvalidError(std::string(key) + ": " + *path + ": no such file");
    }
  }
  if (c.cert_file.empty() != c.key_file.empty()) {
    return InvalidError("etcd_cert_file, etcd_key_file: give both or neither");
  }
  if (config.etcd.prefix.empty() || config.etcd.prefix[0] != '/') {
    return InvalidError("etcd_prefix: \"" + config.etcd.prefix + "\": must start with '/'");
  }
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<JobStore>> OpenJobStore(const JobStoreConfig& config) {
  if (config.backend == "sqlite") {
    if (config.state_dir.empty()) return InvalidError("--state-dir: required");
    TRAINLET_ASSIGN_OR_RETURN(auto store, SqliteJobStore::Open(config.state_dir));
    return std::unique_ptr<JobStore>(std::move(store));
  }
  if (config.backend != "etcd") {
    return InvalidError("store: must be sqlite or etcd, got \"" + config.backend + "\"");
  }
  TRAINLET_RETURN_IF_ERROR(CheckEtcdConfig(config));
  EtcdStoreConfig etcd = config.etcd;
  etcd.client.endpoints = SplitEndpoints(config.etcd_endpoints);
  TRAINLET_ASSIGN_OR_RETURN(auto store, EtcdJobStore::Open(std::move(etcd)));
  return std::unique_ptr<JobStore>(std::move(store));
}

Result<JobStoreConfig> LoadJobStoreConfig(const std::string& yaml_file) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(yaml_file);
  } catch (const YAML::Exception& e) {
    return InvalidError(yaml_file + ": " + e.what());
  }
  if (!root.IsMap()) return InvalidError(yaml_file + ": must be a map of config keys");
  JobStoreConfig config;
  auto text = [&](const char* key, std::string* out) -> Status {
    const YAML::Node n = root[key];
    if (!n) return Status::Ok();
    if (!n.IsScalar()) return InvalidError(yaml_file + ": " + key + ": must be a string");
    *out = n.as<std::string>();
    return Status::Ok();
  };
  TRAINLET_RETURN_IF_ERROR(text("store", &config.backend));
  TRAINLET_RETURN_IF_ERROR(text("state_dir", &config.state_dir));
  if (const YAML::Node list = root["etcd_endpoints"]; list && list.IsSequence()) {
    for (const auto& e : list) config.etcd_endpoints += e.as<std::string>() + ",";
  } else {
    TRAINLET_RETURN_IF_ERROR(text("etcd_endpoints", &config.etcd_endpoints));
  }
  TRAINLET_RETURN_IF_ERROR(text("etcd_prefix", &config.etcd.prefix));
  TRAINLET_RETURN_IF_ERROR(text("etcd_ca_file", &config.etcd.client.ca_file));
  TRAINLET_RETURN_IF_ERROR(text("etcd_cert_file", &config.etcd.client.cert_file));
  TRAINLET_RETURN_IF_ERROR(text("etcd_key_file", &config.etcd.client.key_file));
  if (config.backend != "etcd") {
    return InvalidError(yaml_file + ": store: the target of --migrate-store must be store: etcd");
  }
  if (Status s = CheckEtcdConfig(config); !s.ok()) {
    return InvalidError(yaml_file + ": " + s.message());
  }
  return config;
}

}  // namespace trainlet::coordinator
