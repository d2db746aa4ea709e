#include "plugins/accelerator/label_value.h"

#include <cctype>

namespace trainlet::accelerator {

std::string LabelValue(std::string_view text) {
  std::string out;
  for (char c : text) {
    const bool ok = std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
    if (ok) {
      out += c;
    } else if (!out.empty() && out.back() != '-') {
      out += '-';
    }
  }
  if (out.size() > 63) out.resize(63);
  while (!out.empty() && !std::isalnum(static_cast<unsigned char>(out.back()))) out.pop_back();
  size_t start = 0;
  while (start < out.size() && !std::isalnum(static_cast<unsigned char>(out[start]))) ++start;
  return out.substr(start);
}

}  // namespace trainlet::accelerator
