#include "coordinator/missed_purges_tombstone.h"

#include <nlohmann/json.hpp>

namespace trainlet::coordinator {

using nlohmann::json;

std::string PurgeTombstone::Key() const { return kPurgeTombstonePrefix + node + "/" + job; }

std::string PurgeTombstone::Value() const {
  return json{{"version", 1}, {"uid", uid}, {"deletedMs", deleted_unix_ms}, {"shared", shared}}
      .dump();
}

Result<PurgeTombstone> DecodePurgeTombstone(const std::string& key, const std::string& value) {
  const std::string prefix = kPurgeTombstonePrefix;
  const std::string at = "purge tombstone " + key;
  if (key.compare(0, prefix.size(), prefix) != 0) return InvalidError(at + ": not under " + prefix);
  const std::string rest = key.substr(prefix.size());
  const size_t slash = rest.rfind('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == rest.size()) {
    return InvalidError(at + ": wants " + prefix + "<node>/<job>");
  }
  const json doc = json::parse(value, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) return InvalidError(at + ": not a JSON object");
  if (!doc.contains("version") || doc["version"] != 1) {
    return InvalidError(at + ": version is not 1");
  }
  if (!doc.contains("uid") || !doc["uid"].is_string() || !doc.contains("deletedMs") ||
      !doc["deletedMs"].is_number_integer() || !doc.contains("shared") ||
      !doc["shared"].is_boolean()) {
    return InvalidError(at + ": wants uid (string), deletedMs (integer), shared (boolean)");
  }
  PurgeTombstone t;
  t.node = rest.substr(0, slash);
  t.job = rest.substr(slash + 1);
  t.uid = doc["uid"].get<std::string>();
  t.deleted_unix_ms = doc["deletedMs"].get<int64_t>();
  t.shared = doc["shared"].get<bool>();
  return t;
}

}  // namespace trainlet::coordinator
