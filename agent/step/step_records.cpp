#include "agent/step/step_records.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <limits>

namespace trainlet::step {
namespace {

// Splits on single spaces; a field may not be empty.
std::vector<std::string_view> Fields(std::string_view line, size_t max_fields) {
  std::vector<std::string_view> out;
  while (!line.empty() && out.size() + 1 < max_fields) {
    const size_t sp = line.find(' ');
    if (sp == std::string_view::npos) break;
    out.push_back(line.substr(0, sp));
    line.remove_prefix(sp + 1);
  }
  out.push_back(line);
  return out;
}

template <typename T>
bool ParseNumber(std::string_view text, T* value) {
  if (text.empty() || text.size() > 20) return false;
  if (text.size() > 1 && text[0] == '0') return false;  // one spelling per number
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, *value);
  return ec == std::errc() && ptr == end;
}

std::string Quote(std::string_view line) {
  std::string out;
  for (char c : line.substr(0, 60)) {
    out += (c >= 0x20 && c < 0x7f) ? c : '?';
  }
  if (line.size() > 60) out += "...";
  return "'" + out + "'";
}

// One line without its newline. Empty optional: not a valid record.
std::optional<StepRecord> ParseLine(std::string_view line) {
  if (line.size() < 1) return std::nullopt;
  StepRecord r;
  const char kind = line[0];
  if (line.size() > 1 && line[1] != ' ') return std::nullopt;
  std::string_view rest = line.size() > 2 ? line.substr(2) : std::string_view();
  if (line.size() == 2) return std::nullopt;  // "X " with nothing after
  switch (kind) {
    case 'H': {
      auto f = Fields(rest, 3);
      int version = 0;
      int32_t pid = 0;
      if (f.size() != 3 || !ParseNumber(f[0], &version) || version != kStepRecordVersion ||
          !ParseNumber(f[1], &pid) || pid <= 0 || !ParseNumber(f[2], &r.start_time)) {
        return std::nullopt;
      }
      r.kind = StepRecord::Kind::kHeader;
      r.pid = pid;
      return r;
    }
    case 'S': {
      auto f = Fields(rest, 3);
      int32_t pid = 0;
      if (f.size() != 3 || !ParseNumber(f[0], &r.rank) || !ParseNumber(f[1], &pid) || pid <= 0 ||
          !ParseNumber(f[2], &r.start_time)) {
        return std::nullopt;
      }
      r.kind = StepRecord::Kind::kStarted;
      r.pid = pid;
      return r;
    }
    case 'F': {
      auto f = Fields(rest, 2);
      if (f.size() != 2 || !ParseNumber(f[0], &r.rank)) return std::nullopt;
      r.kind = StepRecord::Kind::kStartFailed;
      r.message = std::string(f[1]);
      return r;
    }
    case 'X': {
      auto f = Fields(rest, 4);
      int32_t pid = 0;
      if (f.size() != 4 || !ParseNumber(f[0], &r.rank) || !ParseNumber(f[1], &pid) || pid <= 0 ||
          !ParseNumber(f[2], &r.exit_code) || r.exit_code < 0 || r.exit_code > 255 ||
          !ParseNumber(f[3], &r.signal) || r.signal < 0 || r.signal > 64) {
        return std::nullopt;
      }
      r.kind = StepRecord::Kind::kExited;
      r.pid = pid;
      return r;
    }
    case 'D':
      if (line.size() != 1 && rest != "C") return std::nullopt;
      r.kind = StepRecord::Kind::kDone;
      r.contained = rest == "C";
      return r;
    default:
      return std::nullopt;
  }
}

}  // namespace

std::string EncodeRecord(const StepRecord& r) {
  std::string line(1, static_cast<char>(r.kind));
  auto field = [&line](auto value) {
    line += ' ';
    line += std::to_string(value);
  };
  switch (r.kind) {
    case StepRecord::Kind::kHeader:
      field(kStepRecordVersion);
      field(r.pid);
      field(r.start_time);
      break;
    case StepRecord::Kind::kStarted:
      field(r.rank);
      field(r.pid);
      field(r.start_time);
      break;
    case StepRecord::Kind::kStartFailed: {
      field(r.rank);
      line += ' ';
      const size_t at = line.size();
      line.append(r.message, 0, kMaxRecordBytes - 32);
      for (size_t i = at; i < line.size(); ++i) {
        if (line[i] == '\n' || line[i] == '\r' || line[i] == '\0') line[i] = ' ';
      }
      break;
    }
    case StepRecord::Kind::kExited:
      field(r.rank);
      field(r.pid);
      field(r.exit_code);
      field(r.signal);
      break;
    case StepRecord::Kind::kDone:
      if (r.contained) line += " C";
      break;
  }
  line += '\n';
  return line;
}

Result<size_t> ParseRecords(std::string_view data, uint64_t base, std::vector<StepRecord>* out) {
  size_t pos = 0;
  while (pos < data.size()) {
    const size_t nl = data.find('\n', pos);
    if (nl == std::string_view::npos) {
      // An unfinished line may yet be completed, unless it is already too long to be a record.
      if (data.size() - pos > kMaxRecordBytes) {
        return InvalidError("byte " + std::to_string(base + pos) + ": " +
                            std::to_string(data.size() - pos) +
                            " bytes without a newline, not a record: " + Quote(data.substr(pos)));
      }
      break;
    }
    const std::string_view line = data.substr(pos, nl - pos);
    std::optional<StepRecord> record;
    if (line.size() <= kMaxRecordBytes && line.find('\0') == std::string_view::npos) {
      record = ParseLine(line);
    }
    if (!record) {
      return InvalidError("byte " + std::to_string(base + pos) +
                          ": not a step record: " + Quote(line));
    }
    if (out->empty() && record->kind != StepRecord::Kind::kHeader && base == 0) {
      return InvalidError("byte 0: the first record must be the H header, not " + Quote(line));
    }
    out->push_back(std::move(*record));
    pos = nl + 1;
  }
  return pos;
}

}  // namespace trainlet::step
