#include "trainletctl/local_cluster_layout.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

namespace trainlet::cli {

uint32_t LocalAgentSlots(uint32_t asked, bool has_topology, unsigned pus) {
  if (asked != 0) return asked;
  if (has_topology) return 0;
  return std::max<uint32_t>(pus, kLocalAgentMinSlots);
}

std::string LocalAgentHostname(const std::string& cluster_dir, const std::string& node) {
  uint32_t h = 2166136261u;  // FNV-1a: stable across runs and builds, unlike std::hash
  for (unsigned char c : cluster_dir) h = (h ^ c) * 16777619u;
  char hex[9];
  std::snprintf(hex, sizeof hex, "%08x", h);
  return node.substr(0, 63 - 9) + "-" + hex;
}

std::string CoordinatorListenPath(const std::string& cluster_dir) {
  return cluster_dir + "/coordinator-listen.json";
}

Result<std::optional<CoordinatorListen>> LoadCoordinatorListen(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    if (!std::filesystem::exists(path)) return std::optional<CoordinatorListen>();
    return IoError("cannot read " + path);
  }
  try {
    const auto j = nlohmann::json::parse(in);
    CoordinatorListen l{j.at("agent").get<std::string>(), j.at("operator").get<std::string>(),
                        j.at("exec").get<std::string>()};
    for (const std::string* ep : {&l.agent, &l.op, &l.exec}) {
      if (ep->rfind("tcp://", 0) != 0)
        return InvalidError(path + ": not a tcp:// endpoint: " + *ep);
    }
    return std::optional<CoordinatorListen>(std::move(l));
  } catch (const std::exception& e) {
    return InvalidError(path + ": " + e.what() +
                        " (remove it to let the coordinator pick new ports, then restart the "
                        "agents too)");
  }
}

Status SaveCoordinatorListen(const std::string& path, const CoordinatorListen& listen) {
  const nlohmann::json j = {
      {"agent", listen.agent}, {"operator", listen.op}, {"exec", listen.exec}};
  std::ofstream out(path, std::ios::trunc);
  out << j.dump(2) << "\n";
  if (!out.flush()) return IoError("cannot write " + path);
  return Status::Ok();
}

}  // namespace trainlet::cli
