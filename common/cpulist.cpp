#include "common/cpulist.h"

#include <algorithm>
#include <charconv>
#include <cstdint>

namespace trainlet {
namespace {

std::string_view Trim(std::string_view s) {
  constexpr std::string_view kSpace = " \t\r\n";
  const size_t begin = s.find_first_not_of(kSpace);
  if (begin == std::string_view::npos) return {};
  return s.substr(begin, s.find_last_not_of(kSpace) - begin + 1);
}

Status BadEntry(std::string_view list, std::string_view entry, std::string_view why) {
  std::string msg = "cpulist \"";
  msg.append(list).append("\": entry \"").append(entry).append("\" ").append(why);
  return InvalidError(std::move(msg));
}

// Parses all of `s` as a decimal number; false for anything else ("", "+1", "1x", overflow).
bool ParseNumber(std::string_view s, unsigned* out) {
  if (s.empty()) return false;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && end == s.data() + s.size();
}

// One entry: "N", "A-B", "A-B:S" or "A-B:U/G". Appends its CPUs to `cpus`.
Status ParseEntry(std::string_view list, std::string_view entry, std::vector<unsigned>* cpus) {
  if (entry.empty()) return BadEntry(list, entry, "is empty");
  std::string_view range = entry;
  std::string_view step;
  if (const size_t colon = entry.find(':'); colon != std::string_view::npos) {
    range = entry.substr(0, colon);
    step = entry.substr(colon + 1);
  }
  unsigned first = 0;
  unsigned last = 0;
  const size_t dash = range.find('-');
  if (dash == std::string_view::npos) {
    if (!step.empty() || range.size() != entry.size()) {
      return BadEntry(list, entry, "has a stride but is not a range");
    }
    if (!ParseNumber(range, &first)) return BadEntry(list, entry, "is not a number");
    last = first;
  } else if (!ParseNumber(range.substr(0, dash), &first) ||
             !ParseNumber(range.substr(dash + 1), &last)) {
    return BadEntry(list, entry, "is not a number or a range of numbers");
  }
  if (last < first) return BadEntry(list, entry, "is a range that ends before it starts");
  if (last >= kMaxCpuNumber) {
    return BadEntry(list, entry, "names a CPU beyond " + std::to_string(kMaxCpuNumber - 1));
  }
  unsigned used = 1;   // take the first `used` CPUs ...
  unsigned group = 1;  // ... of every `group`
  if (range.size() != entry.size()) {
    const size_t slash = step.find('/');
    const bool ok = slash == std::string_view::npos
                        ? ParseNumber(step, &group)
                        : ParseNumber(step.substr(0, slash), &used) &&
                              ParseNumber(step.substr(slash + 1), &group);
    if (!ok) return BadEntry(list, entry, "has a stride that is not a number");
    if (group == 0 || used == 0 || used > group) {
      return BadEntry(list, entry, "has a stride that selects nothing or more than its group");
    }
  }
  // 64-bit so that a huge group size cannot wrap around.
  for (uint64_t base = first; base <= last; base += group) {
    for (uint64_t cpu = base; cpu < base + used && cpu <= last; ++cpu) {
      cpus->push_back(static_cast<unsigned>(cpu));
    }
  }
  return Status::Ok();
}

}  // namespace

std::string FormatCpuList(const std::vector<unsigned>& cpus) {
  std::vector<unsigned> sorted = cpus;
  std::sort(sorted.begin(), sorted.end());
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  std::string out;
  for (size_t i = 0; i < sorted.size();) {
    size_t j = i;
    while (j + 1 < sorted.size() && sorted[j + 1] == sorted[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(sorted[i]);
    if (j > i) out += '-' + std::to_string(sorted[j]);
    i = j + 1;
  }
  return out;
}

Result<std::vector<unsigned>> ParseCpuList(std::string_view text) {
  const std::string_view list = Trim(text);
  std::vector<unsigned> cpus;
  if (list.empty()) return cpus;
  size_t start = 0;
  while (true) {
    const size_t comma = list.find(',', start);
    const std::string_view entry = list.substr(
        start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    TRAINLET_RETURN_IF_ERROR(ParseEntry(list, Trim(entry), &cpus));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  return cpus;
}

}  // namespace trainlet
