#include "common/pmix/fence_data.h"

#include <algorithm>
#include <charconv>
#include <map>

namespace trainlet::pmix {
namespace {

std::string Prefix(uint64_t fence) { return "pmix/fence-" + std::to_string(fence) + "/node-"; }

// Reads a decimal number from the front of `s` up to `stop` (or the end when stop is '\0').
bool TakeNumber(std::string_view& s, char stop, uint64_t* out) {
  const size_t end = stop == '\0' ? s.size() : s.find(stop);
  if (end == 0 || end == std::string_view::npos) return false;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + end, *out);
  if (ec != std::errc() || ptr != s.data() + end) return false;
  s.remove_prefix(stop == '\0' ? end : end + 1);
  return true;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> FenceDataPuts(uint64_t fence, uint32_t node,
                                                               std::string_view data,
                                                               size_t chunk_bytes) {
  std::vector<std::pair<std::string, std::string>> puts;
  const std::string mine = Prefix(fence) + std::to_string(node) + "/";
  for (size_t off = 0, k = 0; off < data.size(); off += chunk_bytes, ++k) {
    const size_t len = std::min(chunk_bytes, data.size() - off);
    puts.emplace_back(mine + std::to_string(k), std::string(data.substr(off, len)));
  }
  return puts;
}

std::string JoinFenceData(uint64_t fence,
                          const std::vector<std::pair<std::string_view, std::string_view>>& pairs) {
  const std::string prefix = Prefix(fence);
  std::map<std::pair<uint64_t, uint64_t>, std::string_view> parts;  // (node, chunk) -> bytes
  for (const auto& [key, value] : pairs) {
    if (key.substr(0, prefix.size()) != prefix) continue;
    std::string_view rest = key.substr(prefix.size());
    uint64_t node = 0, chunk = 0;
    if (!TakeNumber(rest, '/', &node) || !TakeNumber(rest, '\0', &chunk)) continue;
    parts[{node, chunk}] = value;
  }
  std::string all;
  for (const auto& [at, bytes] : parts) all += bytes;
  return all;
}

}  // namespace trainlet::pmix
