#include "coordinator/fair_share_history.h"

#include <cmath>
#include <nlohmann/json.hpp>

namespace trainlet::coordinator {

using nlohmann::json;

std::string EncodeUsageHistory(const std::vector<admission::UsageHistory>& history) {
  json queues = json::array();
  for (const auto& h : history) {
    json usage = json::object();
    for (const auto& [resource, amount] : h.usage) usage[resource] = amount;
    queues.push_back({{"clusterQueue", h.cluster_queue}, {"asOfMs", h.as_of_ms}, {"usage", usage}});
  }
  return json{{"version", 1}, {"queues", std::move(queues)}}.dump();
}

Result<std::vector<admission::UsageHistory>> DecodeUsageHistory(const std::string& bytes) {
  std::vector<admission::UsageHistory> out;
  if (bytes.empty()) return out;
  const json doc = json::parse(bytes, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) {
    return InvalidError("fair-share history: not a JSON object");
  }
  if (!doc.contains("version") || doc["version"] != 1) {
    return InvalidError("fair-share history: version is not 1");
  }
  if (!doc.contains("queues") || !doc["queues"].is_array()) {
    return InvalidError("fair-share history: queues is not a list");
  }
  for (size_t i = 0; i < doc["queues"].size(); ++i) {
    const json& q = doc["queues"][i];
    const std::string at = "fair-share history: queues[" + std::to_string(i) + "]";
    if (!q.is_object() || !q.contains("clusterQueue") || !q["clusterQueue"].is_string() ||
        !q.contains("asOfMs") || !q["asOfMs"].is_number_integer() || !q.contains("usage") ||
        !q["usage"].is_object()) {
      return InvalidError(at + ": wants clusterQueue (string), asOfMs (integer), usage (map)");
    }
    admission::UsageHistory h;
    h.cluster_queue = q["clusterQueue"].get<std::string>();
    h.as_of_ms = q["asOfMs"].get<int64_t>();
    for (const auto& [resource, amount] : q["usage"].items()) {
      if (!amount.is_number() || !std::isfinite(amount.get<double>()) || amount.get<double>() < 0) {
        return InvalidError(at + ".usage." + resource + ": not a non-negative number");
      }
      h.usage[resource] = amount.get<double>();
    }
    out.push_back(std::move(h));
  }
  return out;
}

}  // namespace trainlet::coordinator
