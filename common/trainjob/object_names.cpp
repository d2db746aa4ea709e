#include "common/trainjob/object_names.h"

#include <algorithm>

namespace trainlet::trainjob {
namespace {

bool IsLowerAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

}  // namespace

bool IsDns1123Label(std::string_view s) {
  if (s.empty() || s.size() > 63 || !IsLowerAlnum(s.front()) || !IsLowerAlnum(s.back())) {
    return false;
  }
  return std::all_of(s.begin(), s.end(), [](char c) { return IsLowerAlnum(c) || c == '-'; });
}

bool IsDns1035Label(std::string_view s) {
  return IsDns1123Label(s) && s.front() >= 'a' && s.front() <= 'z';
}

bool IsDns1123Subdomain(std::string_view s) {
  if (s.empty() || s.size() > 253) return false;
  size_t start = 0;
  while (true) {
    const size_t dot = s.find('.', start);
    if (!IsDns1123Label(s.substr(start, dot == std::string_view::npos ? dot : dot - start))) {
      return false;
    }
    if (dot == std::string_view::npos) return true;
    start = dot + 1;
  }
}

}  // namespace trainlet::trainjob
