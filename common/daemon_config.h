// DaemonConfig: one typed config per daemon, loaded from a YAML file, with flags overriding it.
//
// A daemon declares each key once, binding it to a member of its own typed config struct; the
// member's value at declaration time is the key's default. The same declaration gives:
//   - the YAML key `heartbeat_ms` in the file named by --config,
//   - the flag `--heartbeat-ms` (underscores become dashes),
//   - validation with one message shape for both, naming the source and the key:
//       agent.yaml: heartbeat_ms: must be an integer from 50 to 60000, got "fast"
//       --heartbeat-ms: must be an integer from 50 to 60000, got "fast"
//   - the effective config for --print-config.
// Precedence: default < file < flag. Unknown keys in the file are refused. Relative paths are
// taken relative to the working directory. Every key is documented in docs/config.md.
//
// Use: declare the keys, AddFlags(app), let CLI11 parse, then Finish(). Single-threaded (main).
#pragma once

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "common/status.h"

namespace YAML {
class Node;
}

namespace trainlet {

class DaemonConfig {
 public:
  // Checks a value already converted to its type; returns "" when fine, else why not.
  using Check = std::function<std::string(const std::string&)>;
  enum class PathKind { kAny, kFile, kDirectory };

  // daemon: the program name used in messages, e.g. "trainlet-agent".
  explicit DaemonConfig(std::string daemon) : daemon_(std::move(daemon)) {}
  const std::string& daemon() const { return daemon_; }

  // Declarations. `doc` is the flag's help line. The pointers must outlive this object.
  void String(const std::string& key, std::string* value, const std::string& doc,
              bool required = false, Check check = {});
  void Path(const std::string& key, std::string* value, PathKind kind, const std::string& doc,
            bool required = false);
  void Enum(const std::string& key, std::string* value, std::vector<std::string> choices,
            const std::string& doc);
  void Int(const std::string& key, int64_t min, int64_t max, std::function<void(int64_t)> set,
           int64_t current, const std::string& doc);
  void Uint32(const std::string& key, uint32_t* value, uint32_t min, uint32_t max,
              const std::string& doc);
  void Millis(const std::string& key, std::chrono::milliseconds* value, int64_t min, int64_t max,
              const std::string& doc);
  // A map of strings; as a flag, repeatable `--key k=v`.
  void StringMap(const std::string& key, std::map<std::string, std::string>* value,
                 const std::string& doc);

  // Adds --config, --print-config and one flag per declared key.
  void AddFlags(CLI::App& app);
  // After CLI11 parsed: loads the --config file, applies the flags that were given, and checks
  // the required keys (unless --print-config was asked for). Errors name the file or flag and
  // the key, ready to print as they are.
  Status Finish();
  bool print_requested() const { return print_config_; }
  // Whether the file or a flag set this key (false: it holds its default).
  bool WasSet(const std::string& key) const;
  // The effective config as YAML, one line per key in declaration order.
  std::string ToYaml() const;
  // Declared key names, in order.
  std::vector<std::string> Keys() const;

  // "host:port" with a port from 0 to 65535, "[v6]:port", ":port", or "" (off). A Check.
  static std::string CheckListenAddress(const std::string& address);

 private:
  struct Key {
    std::string name;
    std::string flag;  // "--heartbeat-ms"
    bool required = false;
    bool is_map = false;
    // Converts and stores one scalar (or, for maps, one "k=v"); returns "" or why not.
    std::function<std::string(const std::string&)> set;
    std::function<void()> clear;           // maps only: drop the default/file entries
    std::function<std::string()> render;   // YAML text of the current value
    std::function<bool()> empty;           // for the required check
    std::string flag_value;                // CLI11 writes here
    std::vector<std::string> flag_values;  // maps
    CLI::Option* option = nullptr;
    bool was_set = false;
  };
  Key& Add(const std::string& key, const std::string& doc);
  Status LoadFile(const std::string& path);
  Status SetFromYaml(Key& key, const YAML::Node& node, const std::string& where);

  std::string daemon_;
  std::deque<Key> keys_;           // a deque: CLI11 holds pointers into its elements
  std::vector<std::string> docs_;  // parallel to keys_, for the flag help
  std::string config_file_;
  bool print_config_ = false;
};

}  // namespace trainlet
