#include "common/quantity.h"

#include <algorithm>
#include <utility>

namespace trainlet {
namespace {

using int128 = __int128;

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
  const int128 cap = int128{kMaxQuantityUnits} << 1;  // anything past this is too large anyway
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
  if (value > kMaxQuantityUnits) return too_large();
  return static_cast<int64_t>(value);
}

}  // namespace trainlet
