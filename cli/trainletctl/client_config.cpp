#include "trainletctl/client_config.h"

#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace trainlet::cli {
namespace fs = std::filesystem;

std::string ResolveHome(const std::string& flag) {
  if (!flag.empty()) return fs::absolute(flag).lexically_normal().string();
  if (const char* env = std::getenv("TRAINLET_HOME"); env != nullptr && *env != '\0') {
    return fs::absolute(env).lexically_normal().string();
  }
  const char* home = std::getenv("HOME");
  return std::string(home != nullptr ? home : "/root") + "/.trainlet";
}

Result<ClientConfig> LoadClientConfig(const std::string& home) {
  const std::string path = home + "/config.yaml";
  if (!fs::exists(path)) {
    return NotFoundError("no client configuration at " + path +
                         ": start a local cluster (trainletctl local up) or set TRAINLET_HOME / "
                         "--home to a directory holding config.yaml");
  }
  ClientConfig c;
  c.home = home;
  try {
    YAML::Node root = YAML::LoadFile(path);
    auto field = [&](const char* key) -> Result<std::string> {
      if (!root[key] || !root[key].IsScalar()) {
        return InvalidError(path + ": " + key + ": required string field missing");
      }
      std::string v = root[key].as<std::string>();
      return v;
    };
    if (const YAML::Node list = root["coordinator"]; list && list.IsSequence()) {
      // Several coordinators (high availability): kept as one comma-separated list.
      for (const auto& e : list) {
        if (!e.IsScalar()) return InvalidError(path + ": coordinator: a list of endpoints");
        c.coordinator += (c.coordinator.empty() ? "" : ",") + e.as<std::string>();
      }
      if (c.coordinator.empty()) return InvalidError(path + ": coordinator: the list is empty");
    } else {
      TRAINLET_ASSIGN_OR_RETURN(c.coordinator, field("coordinator"));
    }
    TRAINLET_ASSIGN_OR_RETURN(c.coordinator_key_file, field("coordinator_key"));
    TRAINLET_ASSIGN_OR_RETURN(c.key_file, field("key"));
  } catch (const YAML::Exception& e) {
    return InvalidError(path + ": " + e.what());
  }
  auto rel = [&](std::string& p) {
    if (!p.empty() && p[0] != '/') p = home + "/" + p;
  };
  rel(c.coordinator_key_file);
  rel(c.key_file);
  return c;
}

Status SaveClientConfig(const ClientConfig& c) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  out << YAML::Key << "coordinator" << YAML::Value << c.coordinator;
  out << YAML::Key << "coordinator_key" << YAML::Value << c.coordinator_key_file;
  out << YAML::Key << "key" << YAML::Value << c.key_file;
  out << YAML::EndMap;
  const std::string path = c.home + "/config.yaml";
  std::ofstream f(path, std::ios::trunc);
  f << "# trainletctl client configuration\n" << out.c_str() << "\n";
  if (!f.flush()) return IoError("cannot write " + path);
  return Status::Ok();
}

}  // namespace trainlet::cli
