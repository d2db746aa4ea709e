#include "common/pmix/pmix_job_map.h"

#include <charconv>
#include <sstream>
#include <string_view>

namespace trainlet::pmix {
namespace {

constexpr size_t kMaxNspace = 255;  // PMIX_MAX_NSLEN

bool ParseU32(std::string_view s, uint32_t* out) {
  if (s.empty()) return false;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && end == s.data() + s.size();
}

std::vector<std::string_view> Split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (true) {
    const size_t at = s.find(sep, start);
    out.push_back(s.substr(start, at == std::string_view::npos ? s.npos : at - start));
    if (at == std::string_view::npos) return out;
    start = at + 1;
  }
}

}  // namespace

uint32_t PmixJobMap::Size() const {
  uint32_t n = 0;
  for (const Node& node : nodes) n += static_cast<uint32_t>(node.ranks.size());
  return n;
}

std::string NamespaceFor(const std::string& job, uint32_t attempt) {
  const std::string tail = "." + std::to_string(attempt);
  std::string head = "trainlet." + job;
  for (char& c : head) {
    if (static_cast<unsigned char>(c) <= ' ' || c == 0x7f) c = '_';
  }
  if (head.size() + tail.size() > kMaxNspace) head.resize(kMaxNspace - tail.size());
  return head + tail;
}

std::string RankListText(const std::vector<uint32_t>& ranks) {
  std::string out;
  for (const uint32_t r : ranks) {
    if (!out.empty()) out += ',';
    out += std::to_string(r);
  }
  return out;
}

std::string NodeListText(const PmixJobMap& map) {
  std::string out;
  for (const auto& node : map.nodes) {
    if (!out.empty()) out += ',';
    out += node.hostname;
  }
  return out;
}

std::string ProcMapText(const PmixJobMap& map) {
  std::string out;
  for (size_t i = 0; i < map.nodes.size(); ++i) {
    if (i != 0) out += ';';
    out += RankListText(map.nodes[i].ranks);
  }
  return out;
}

std::string EncodeJobMap(const PmixJobMap& map) {
  std::string out = "trainlet-pmix-job-map " + std::to_string(kJobMapVersion) + "\n";
  out += "nspace " + map.nspace + "\n";
  for (const auto& node : map.nodes) {
    out += "node " + node.hostname + " " + RankListText(node.ranks) + "\n";
  }
  return out;
}

Result<PmixJobMap> DecodeJobMap(const std::string& text) {
  PmixJobMap map;
  std::istringstream in(text);
  std::string line;
  size_t n = 0;
  const auto bad = [&](const std::string& why) {
    return InvalidError("job map line " + std::to_string(n) + ": " + why);
  };
  while (std::getline(in, line)) {
    ++n;
    const std::vector<std::string_view> f = Split(line, ' ');
    if (n == 1) {
      if (line != "trainlet-pmix-job-map " + std::to_string(kJobMapVersion))
        return bad("not a version " + std::to_string(kJobMapVersion) + " job map");
    } else if (f[0] == "nspace" && f.size() == 2 && !f[1].empty()) {
      if (f[1].size() > kMaxNspace) return bad("nspace over 255 bytes");
      map.nspace = std::string(f[1]);
    } else if (f[0] == "node" && f.size() == 3 && !f[1].empty()) {
      PmixJobMap::Node node;
      node.hostname = std::string(f[1]);
      for (const std::string_view r : Split(f[2], ',')) {
        uint32_t rank = 0;
        if (!ParseU32(r, &rank)) return bad("rank '" + std::string(r) + "' is not a number");
        if (!node.ranks.empty() && rank <= node.ranks.back()) return bad("ranks not ascending");
        node.ranks.push_back(rank);
      }
      map.nodes.push_back(std::move(node));
    } else if (!line.empty()) {
      return bad("unknown line '" + line + "'");
    }
  }
  if (n == 0) return InvalidError("job map: empty");
  if (map.nspace.empty()) return InvalidError("job map: no nspace line");
  if (map.nodes.empty()) return InvalidError("job map: no node lines");
  std::vector<bool> seen(map.Size(), false);
  for (const auto& node : map.nodes) {
    for (const uint32_t r : node.ranks) {
      if (r >= seen.size() || seen[r]) {
        return InvalidError("job map: rank " + std::to_string(r) +
                            " is listed twice or outside 0.." + std::to_string(seen.size() - 1));
      }
      seen[r] = true;
    }
  }
  return map;
}

Result<std::string> EncodeRankEnvLine(uint32_t rank, const std::string& key_value) {
  if (key_value.find('=') == std::string::npos || key_value.front() == '=')
    return InvalidError("env entry '" + key_value + "' is not KEY=VALUE");
  if (key_value.find('\n') != std::string::npos)
    return InvalidError("env entry " + key_value.substr(0, key_value.find('=')) +
                        " holds a newline");
  return "env " + std::to_string(rank) + " " + key_value + "\n";
}

Result<std::map<uint32_t, std::map<std::string, std::string>>> ParseRankEnvStream(
    const std::string& text) {
  std::map<uint32_t, std::map<std::string, std::string>> out;
  size_t start = 0, n = 0;
  while (start < text.size()) {
    const size_t end = text.find('\n', start);
    if (end == std::string::npos) break;  // a cut-off last line: no "ready" yet
    const std::string_view line(text.data() + start, end - start);
    start = end + 1;
    ++n;
    if (line == "ready") return out;
    if (line.rfind("error ", 0) == 0) return UnavailableError(std::string(line.substr(6)));
    const auto bad = [&](const std::string& why) {
      return InvalidError("rank env line " + std::to_string(n) + ": " + why);
    };
    if (line.rfind("env ", 0) != 0) return bad("unknown line");
    const size_t space = line.find(' ', 4);
    uint32_t rank = 0;
    if (space == std::string_view::npos || !ParseU32(line.substr(4, space - 4), &rank))
      return bad("no rank");
    const std::string_view kv = line.substr(space + 1);
    const size_t eq = kv.find('=');
    if (eq == std::string_view::npos || eq == 0) return bad("not KEY=VALUE");
    out[rank][std::string(kv.substr(0, eq))] = std::string(kv.substr(eq + 1));
  }
  return InvalidError("rank env stream ended after " + std::to_string(n) +
                      " line(s) without 'ready'");
}

}  // namespace trainlet::pmix
