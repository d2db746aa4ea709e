#include "coordinator/resources.h"

#include <algorithm>

namespace trainlet::coordinator {
namespace {

using int128 = __int128;

constexpr int64_t kMaxQuantity = int64_t{1} << 62;

constexpr std::string_view kNames[kNumResourceKinds] = {"cpu", "memory", "nvidia.com/gpu",
                                                        "amd.com/gpu", "apple.com/gpu"};

Status NotAQuantity(std::string_view text) {
  return InvalidError("\"" + std::string(text) +
                      "\" is not a quantity (number with suffix Ki, Mi, Gi, Ti, Pi, Ei, n, u, m, "
                      "k, M, G, T, P or E)");
}

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

int128 Pow10(int n) {
  int128 p = 1;
  for (int i = 0; i < n; ++i) p *= 10;
  return p;
}

// The suffix as a binary shift or a decimal exponent; false when unknown.
bool ParseSuffix(std::string_view s, int* shift, int* exp10) {
  static const std::pair<std::string_view, int> kBinary[] = {{"Ki", 10}, {"Mi", 20}, {"Gi", 30},
                                                             {"Ti", 40}, {"Pi", 50}, {"Ei", 60}};
  static const std::pair<std::string_view, int> kDecimal[] = {
      {"", 0},  {"n", -9}, {"u", -6}, {"m", -3}, {"k", 3},
      {"M", 6}, {"G", 9},  {"T", 12}, {"P", 15}, {"E", 18}};
  for (const auto& [name, v] : kBinary) {
    if (s == name) {
      *shift = v;
      return true;
    }
  }
  for (const auto& [name, v] : kDecimal) {
    if (s == name) {
      *exp10 = v;
      return true;
    }
  }
  return false;
}

}  // namespace

std::string_view ResourceName(ResourceKind kind) { return kNames[static_cast<int>(kind)]; }

bool IsGpu(ResourceKind kind) {
  return kind == ResourceKind::kNvidiaGpu || kind == ResourceKind::kAmdGpu ||
         kind == ResourceKind::kAppleGpu;
}

bool Resources::empty() const {
  return std::all_of(amount.begin(), amount.end(), [](int64_t v) { return v == 0; });
}

bool Resources::Covers(const Resources& request) const {
  for (int i = 0; i < kNumResourceKinds; ++i) {
    if (request.amount[i] > amount[i]) return false;
  }
  return true;
}

Resources& Resources::operator+=(const Resources& other) {
  for (int i = 0; i < kNumResourceKinds; ++i) amount[i] += other.amount[i];
  return *this;
}

Resources& Resources::operator-=(const Resources& other) {
  for (int i = 0; i < kNumResourceKinds; ++i) {
    amount[i] = std::max<int64_t>(0, amount[i] - other.amount[i]);
  }
  return *this;
}

Result<int64_t> ParseQuantity(std::string_view text, int64_t scale) {
  std::string_view s = text;
  if (s.empty()) return NotAQuantity(text);
  bool negative = false;
  if (s[0] == '+' || s[0] == '-') {
    negative = s[0] == '-';
    s.remove_prefix(1);
  }
  // Mantissa digits as one integer; `exp10` counts the decimal places it was shifted by.
  int128 mantissa = 0;
  int exp10 = 0, digits = 0, significant = 0;
  bool seen_point = false;
  size_t i = 0;
  for (; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '.' && !seen_point) {
      seen_point = true;
      continue;
    }
    if (!IsDigit(c)) break;
    ++digits;
    if (significant < 30) {  // more digits than this cannot change a value capped at 2^62
      mantissa = mantissa * 10 + (c - '0');
      if (mantissa != 0) ++significant;
      if (seen_point) --exp10;
    } else if (!seen_point) {
      ++exp10;
    }
  }
  if (digits == 0) return NotAQuantity(text);
  std::string_view rest = s.substr(i);
  int shift = 0, suffix_exp10 = 0;
  const bool suffix_known = ParseSuffix(rest, &shift, &suffix_exp10);
  // An exponent ("1e3", "5E-2"); "1E" and "1Ei" are suffixes.
  if (!suffix_known && rest.size() > 1 && (rest[0] == 'e' || rest[0] == 'E')) {
    size_t j = 1;
    bool exp_negative = false;
    if (rest[j] == '+' || rest[j] == '-') exp_negative = rest[j++] == '-';
    if (j >= rest.size()) return NotAQuantity(text);
    int e = 0;
    for (; j < rest.size(); ++j) {
      if (!IsDigit(rest[j])) return NotAQuantity(text);
      e = std::min(e * 10 + (rest[j] - '0'), 1000);
    }
    exp10 += exp_negative ? -e : e;
  } else if (!suffix_known) {
    return NotAQuantity(text);
  }
  exp10 += suffix_exp10;
  if (negative && mantissa != 0) {
    return InvalidError("\"" + std::string(text) + "\": must not be negative");
  }

  int128 value = mantissa * scale;
  const int128 cap = int128{kMaxQuantity} << 1;  // anything past this is too large anyway
  auto too_large = [&] { return InvalidError("\"" + std::string(text) + "\": too large"); };
  for (int b = 0; b < shift && value != 0; ++b) {
    value <<= 1;
    if (value > cap) return too_large();
  }
  if (exp10 > 0) {
    for (int e = 0; e < exp10 && value != 0; ++e) {
      value *= 10;
      if (value > cap) return too_large();
    }
  } else if (exp10 < 0) {
    if (-exp10 > 38) {
      value = value != 0 ? 1 : 0;
    } else {
      const int128 div = Pow10(-exp10);
      value = (value + div - 1) / div;  // rounded up, as Kubernetes rounds requests
    }
  }
  if (value > kMaxQuantity) return too_large();
  return static_cast<int64_t>(value);
}

std::string FormatQuantity(ResourceKind kind, int64_t amount) {
  if (kind == ResourceKind::kCpu) {
    if (amount % 1000 == 0) return std::to_string(amount / 1000);
    return std::to_string(amount) + "m";
  }
  if (kind == ResourceKind::kMemory && amount != 0) {
    // The shortest exact form, binary first on a tie: 4Gi, 16G, 1536Mi.
    std::string best = std::to_string(amount);
    static const std::pair<const char*, int64_t> kUnits[] = {
        {"Ei", int64_t{1} << 60}, {"Pi", int64_t{1} << 50},
        {"Ti", int64_t{1} << 40}, {"Gi", int64_t{1} << 30},
        {"Mi", int64_t{1} << 20}, {"Ki", int64_t{1} << 10},
        {"T", 1000000000000},     {"G", 1000000000},
        {"M", 1000000},           {"k", 1000}};
    for (const auto& [suffix, unit] : kUnits) {
      if (amount % unit != 0) continue;
      std::string s = std::to_string(amount / unit) + suffix;
      if (s.size() < best.size()) best = std::move(s);
    }
    return best;
  }
  return std::to_string(amount);
}

std::string FormatResources(const Resources& r) {
  std::string out;
  for (int i = 0; i < kNumResourceKinds; ++i) {
    if (r.amount[i] == 0) continue;
    const auto kind = static_cast<ResourceKind>(i);
    if (!out.empty()) out += ", ";
    out += std::string(ResourceName(kind)) + ": " + FormatQuantity(kind, r.amount[i]);
  }
  return out;
}

Result<ParsedRequests> ParseResourceRequests(const std::map<std::string, std::string>& requests) {
  ParsedRequests out;
  for (const auto& [name, text] : requests) {
    int kind = -1;
    for (int i = 0; i < kNumResourceKinds; ++i) {
      if (name == kNames[i]) kind = i;
    }
    const std::string field = "spec.trainer.resourcesPerNode." + name;
    if (kind < 0) {
      out.ignored.push_back(field +
                            ": ignored (trainlet places by cpu, memory, nvidia.com/gpu, "
                            "amd.com/gpu and apple.com/gpu)");
      continue;
    }
    const auto k = static_cast<ResourceKind>(kind);
    auto q = ParseQuantity(text, k == ResourceKind::kCpu ? 1000 : 1);
    if (!q.ok()) return InvalidError(field + ": " + q.status().message());
    out.resources[k] = *q;
  }
  return out;
}

Resources AllocatableOf(const v1::NodeInfo& info) {
  Resources r;
  if (!info.allocatable().empty()) {  // the agent's own account (its accelerator plugins)
    for (int i = 0; i < kNumResourceKinds; ++i) {
      auto it = info.allocatable().find(std::string(kNames[i]));
      if (it == info.allocatable().end()) continue;
      const int64_t v = std::clamp<int64_t>(it->second, 0, kMaxQuantity / 1000);
      r.amount[i] = i == static_cast<int>(ResourceKind::kCpu) ? v * 1000 : v;
    }
    return r;
  }
  const v1::Topology& t = info.topology();
  r[ResourceKind::kCpu] = int64_t{t.pus()} * 1000;
  r[ResourceKind::kMemory] =
      static_cast<int64_t>(std::min<uint64_t>(t.memory_bytes(), kMaxQuantity));
  for (const auto& gpu : t.gpus()) {
    if (gpu.vendor() == "nvidia") ++r[ResourceKind::kNvidiaGpu];
    if (gpu.vendor() == "amd") ++r[ResourceKind::kAmdGpu];
    if (gpu.vendor() == "apple") ++r[ResourceKind::kAppleGpu];
  }
  return r;
}

}  // namespace trainlet::coordinator
