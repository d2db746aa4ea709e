#include "common/daemon_config.h"

#include <yaml-cpp/yaml.h>

#include <charconv>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace trainlet {
namespace {

std::string Quoted(const std::string& s) {
  YAML::Emitter e;
  e << YAML::DoubleQuoted << s;
  return e.c_str();
}

std::string FlagFor(const std::string& key) {
  std::string f = "--" + key;
  for (char& c : f) c = c == '_' ? '-' : c;
  return f;
}

// Parses a whole string as a decimal integer; false if anything else is there.
bool ParseInt(const std::string& s, int64_t& out) {
  const char* end = s.data() + s.size();
  auto [p, ec] = std::from_chars(s.data(), end, out);
  return ec == std::errc() && p == end && !s.empty();
}

const char* NodeKind(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Null:
      return "nothing";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Map:
      return "a map";
    default:
      return "a scalar";
  }
}

}  // namespace

DaemonConfig::Key& DaemonConfig::Add(const std::string& key, const std::string& doc) {
  for (const Key& k : keys_) TRAINLET_CHECK_MSG(k.name != key, "config key declared twice: " + key);
  Key& k = keys_.emplace_back();
  k.name = key;
  k.flag = FlagFor(key);
  docs_.push_back(doc);
  return k;
}

void DaemonConfig::String(const std::string& key, std::string* value, const std::string& doc,
                          bool required, Check check) {
  Key& k = Add(key, doc);
  k.required = required;
  k.set = [value, check](const std::string& v) {
    if (check) {
      if (std::string why = check(v); !why.empty()) return why;
    }
    *value = v;
    return std::string();
  };
  k.render = [value] { return Quoted(*value); };
  k.empty = [value] { return value->empty(); };
}

void DaemonConfig::Path(const std::string& key, std::string* value, PathKind kind,
                        const std::string& doc, bool required) {
  String(key, value, doc, required, [kind](const std::string& v) -> std::string {
    if (v.empty() || kind == PathKind::kAny) return "";
    std::error_code ec;
    const auto st = std::filesystem::status(v, ec);
    if (kind == PathKind::kFile && !std::filesystem::is_regular_file(st)) {
      return "must name an existing file, got " + Quoted(v);
    }
    if (kind == PathKind::kDirectory && !std::filesystem::is_directory(st)) {
      return "must name an existing directory, got " + Quoted(v);
    }
    return "";
  });
}

void DaemonConfig::Enum(const std::string& key, std::string* value,
                        std::vector<std::string> choices, const std::string& doc) {
  String(key, value, doc, false, [choices](const std::string& v) -> std::string {
    std::string list;
    for (const auto& c : choices) {
      if (v == c) return "";
      list += (list.empty() ? "" : ", ") + c;
    }
    return "must be one of " + list + ", got " + Quoted(v);
  });
}

void DaemonConfig::Int(const std::string& key, int64_t min, int64_t max,
                       std::function<void(int64_t)> set, int64_t current, const std::string& doc) {
  Key& k = Add(key, doc);
  auto shown = std::make_shared<int64_t>(current);
  k.set = [min, max, set, shown](const std::string& v) -> std::string {
    int64_t n = 0;
    if (!ParseInt(v, n) || n < min || n > max) {
      return "must be an integer from " + std::to_string(min) + " to " + std::to_string(max) +
             ", got " + Quoted(v);
    }
    *shown = n;
    set(n);
    return "";
  };
  k.render = [shown] { return std::to_string(*shown); };
  k.empty = [] { return false; };
}

void DaemonConfig::Uint32(const std::string& key, uint32_t* value, uint32_t min, uint32_t max,
                          const std::string& doc) {
  Int(
      key, min, max, [value](int64_t n) { *value = static_cast<uint32_t>(n); }, *value, doc);
}

void DaemonConfig::Millis(const std::string& key, std::chrono::milliseconds* value, int64_t min,
                          int64_t max, const std::string& doc) {
  Int(
      key, min, max, [value](int64_t n) { *value = std::chrono::milliseconds(n); }, value->count(),
      doc);
}

void DaemonConfig::StringMap(const std::string& key, std::map<std::string, std::string>* value,
                             const std::string& doc) {
  Key& k = Add(key, doc);
  k.is_map = true;
  k.set = [value](const std::string& kv) -> std::string {
    const auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) return "expected key=value, got " + Quoted(kv);
    (*value)[kv.substr(0, eq)] = kv.substr(eq + 1);
    return "";
  };
  k.clear = [value] { value->clear(); };
  k.render = [value] {
    YAML::Emitter e;
    e << YAML::Flow << YAML::BeginMap;
    for (const auto& [mk, mv] : *value)
      e << YAML::Key << mk << YAML::Value << YAML::DoubleQuoted << mv;
    e << YAML::EndMap;
    return std::string(e.c_str());
  };
  k.empty = [value] { return value->empty(); };
}

std::string DaemonConfig::CheckListenAddress(const std::string& address) {
  if (address.empty()) return "";
  const auto colon = address.rfind(':');
  int64_t port = -1;
  if (colon == std::string::npos || !ParseInt(address.substr(colon + 1), port) || port < 0 ||
      port > 65535) {
    return "must be host:port (port 0 to 65535), :port, or \"\" to turn it off, got " +
           Quoted(address);
  }
  return "";
}

void DaemonConfig::AddFlags(CLI::App& app) {
  app.add_option("--config", config_file_, "YAML config file; flags override its keys")
      ->check(CLI::ExistingFile);
  app.add_flag("--print-config", print_config_, "Print the effective config as YAML and exit");
  for (size_t i = 0; i < keys_.size(); ++i) {
    Key& k = keys_[i];
    k.option = k.is_map ? app.add_option(k.flag, k.flag_values, docs_[i] + " (repeatable)")
                        : app.add_option(k.flag, k.flag_value, docs_[i]);
    k.option->option_text(k.is_map ? "KEY=VALUE" : "");
  }
}

Status DaemonConfig::SetFromYaml(Key& key, const YAML::Node& node, const std::string& where) {
  const std::string prefix = where + ": " + key.name + ": ";
  if (key.is_map) {
    if (!node.IsMap() && !node.IsNull()) {
      return InvalidError(prefix + "must be a map of strings, got " + NodeKind(node));
    }
    key.clear();
    for (const auto& entry : node) {
      if (!entry.second.IsScalar()) {
        return InvalidError(prefix + entry.first.Scalar() + ": must be a string, got " +
                            NodeKind(entry.second));
      }
      if (std::string why = key.set(entry.first.Scalar() + "=" + entry.second.Scalar());
          !why.empty()) {
        return InvalidError(prefix + why);
      }
    }
    return Status::Ok();
  }
  if (!node.IsScalar()) {
    return InvalidError(prefix + "must be a single value, got " + NodeKind(node));
  }
  if (std::string why = key.set(node.Scalar()); !why.empty()) return InvalidError(prefix + why);
  return Status::Ok();
}

Status DaemonConfig::LoadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return IoError(path + ": cannot read");
  std::stringstream text;
  text << in.rdbuf();
  YAML::Node root;
  try {
    root = YAML::Load(text.str());
  } catch (const YAML::Exception& e) {
    return InvalidError(path + ": line " + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
  if (root.IsNull()) return Status::Ok();  // an empty file sets nothing
  if (!root.IsMap()) return InvalidError(path + ": must be a map of keys, got " + NodeKind(root));
  for (const auto& entry : root) {
    const std::string name = entry.first.IsScalar() ? entry.first.Scalar() : "?";
    Key* key = nullptr;
    for (Key& k : keys_) key = k.name == name ? &k : key;
    if (key == nullptr) {
      return InvalidError(path + ": " + name + ": unknown key for " + daemon_ +
                          " (docs/config.md lists the keys)");
    }
    TRAINLET_RETURN_IF_ERROR(SetFromYaml(*key, entry.second, path));
    key->was_set = true;
  }
  return Status::Ok();
}

Status DaemonConfig::Finish() {
  if (!config_file_.empty()) TRAINLET_RETURN_IF_ERROR(LoadFile(config_file_));
  for (Key& k : keys_) {
    if (k.option == nullptr || k.option->count() == 0) continue;
    k.was_set = true;
    if (k.is_map) {
      k.clear();  // flags replace the file's map rather than merge into it
      for (const auto& v : k.flag_values) {
        if (std::string why = k.set(v); !why.empty()) return InvalidError(k.flag + ": " + why);
      }
    } else if (std::string why = k.set(k.flag_value); !why.empty()) {
      return InvalidError(k.flag + ": " + why);
    }
  }
  if (print_config_) return Status::Ok();
  for (const Key& k : keys_) {
    if (k.required && k.empty()) {
      return InvalidError(k.name + ": required: set it in the --config file or with " + k.flag);
    }
  }
  return Status::Ok();
}

std::string DaemonConfig::ToYaml() const {
  std::string out = "# effective " + daemon_ + " config";
  out += config_file_.empty() ? "\n" : " (file " + config_file_ + ", then flags)\n";
  for (const Key& k : keys_) out += k.name + ": " + k.render() + "\n";
  return out;
}

bool DaemonConfig::WasSet(const std::string& key) const {
  for (const Key& k : keys_) {
    if (k.name == key) return k.was_set;
  }
  return false;
}

std::vector<std::string> DaemonConfig::Keys() const {
  std::vector<std::string> names;
  for (const Key& k : keys_) names.push_back(k.name);
  return names;
}

}  // namespace trainlet
