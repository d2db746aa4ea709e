#include "plugins/accelerator/apple/apple_silicon.h"

#include <charconv>
#include <map>

namespace trainlet::accelerator {
namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

template <typename T>
Result<T> Number(std::string_view value, const std::string& source, std::string_view key) {
  T out{};
  auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), out);
  if (ec != std::errc() || end != value.data() + value.size()) {
    return InvalidError(source + ": " + std::string(key) + ": not a number: \"" +
                        std::string(value) + "\"");
  }
  return out;
}

}  // namespace

Result<AppleSysctl> ParseAppleSysctl(std::string_view text, const std::string& source) {
  std::map<std::string, std::string, std::less<>> values;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    size_t sep = line.find(": ");
    size_t skip = 2;
    if (sep == std::string_view::npos) {
      sep = line.find(" = ");
      skip = 3;
    }
    if (sep == std::string_view::npos) continue;
    values.emplace(std::string(Trim(line.substr(0, sep))),
                   std::string(Trim(line.substr(sep + skip))));
  }
  AppleSysctl out;
  auto it = values.find("machdep.cpu.brand_string");
  if (it == values.end()) return InvalidError(source + ": no machdep.cpu.brand_string");
  out.brand = it->second;
  it = values.find("hw.memsize");
  if (it == values.end()) return InvalidError(source + ": no hw.memsize");
  TRAINLET_ASSIGN_OR_RETURN(out.memory_bytes, Number<uint64_t>(it->second, source, "hw.memsize"));
  if (it = values.find("hw.perflevel0.physicalcpu"); it != values.end()) {
    TRAINLET_ASSIGN_OR_RETURN(out.performance_cores,
                              Number<uint32_t>(it->second, source, "hw.perflevel0.physicalcpu"));
  }
  if (it = values.find("hw.perflevel1.physicalcpu"); it != values.end()) {
    TRAINLET_ASSIGN_OR_RETURN(out.efficiency_cores,
                              Number<uint32_t>(it->second, source, "hw.perflevel1.physicalcpu"));
  }
  return out;
}

Result<AppleGpu> ParseAppleIoreg(std::string_view text, const std::string& source) {
  AppleGpu out;
  int depth = 0;  // braces: top-level properties of an object are at depth 1
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    const std::string_view t = Trim(line);
    if (t.starts_with("+-o AGXAccelerator")) {
      ++out.accelerators;
      continue;
    }
    if (t == "{") {
      ++depth;
      continue;
    }
    if (t == "}") {
      --depth;
      continue;
    }
    if (depth != 1 || out.accelerators == 0) continue;
    const size_t eq = t.find(" = ");
    if (eq == std::string_view::npos) continue;
    const std::string_view key = t.substr(0, eq);
    const std::string_view value = Trim(t.substr(eq + 3));
    if (key == "\"gpu-core-count\"" && out.gpu_cores == 0) {
      TRAINLET_ASSIGN_OR_RETURN(out.gpu_cores, Number<uint32_t>(value, source, "gpu-core-count"));
    } else if (key == "\"model\"" && out.model.empty() && value.size() >= 2 &&
               value.front() == '"' && value.back() == '"') {
      out.model = std::string(value.substr(1, value.size() - 2));
    }
  }
  return out;
}

bool IsAppleSilicon(const AppleSysctl& sysctl) { return sysctl.brand.starts_with("Apple "); }

}  // namespace trainlet::accelerator
