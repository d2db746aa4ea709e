#include "trainletctl/apply_input.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

namespace trainlet::cli {

size_t FirstInvalidUtf8(std::string_view text) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    const unsigned char c = s[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len = 0;
    unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      if (c == 0xE0) lo = 0xA0;  // overlong
      if (c == 0xED) hi = 0x9F;  // surrogates
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      if (c == 0xF0) lo = 0x90;  // overlong
      if (c == 0xF4) hi = 0x8F;  // past U+10FFFF
    } else {
      return i;
    }
    if (i + len > n || s[i + 1] < lo || s[i + 1] > hi) return i;
    for (size_t k = 2; k < len; ++k) {
      if ((s[i + k] & 0xC0) != 0x80) return i;
    }
    i += len;
  }
  return std::string_view::npos;
}

Result<std::string> ReadApplyInput(const std::string& file, size_t max_bytes) {
  const std::string what = "-f " + file + ": ";
  std::string text;
  if (file == "-") {
    // Read one byte past the cap at most, so a huge pipe is refused without being held.
    text.resize(max_bytes + 1);
    std::cin.read(text.data(), static_cast<std::streamsize>(text.size()));
    text.resize(static_cast<size_t>(std::cin.gcount()));
  } else {
    struct stat st {};
    if (::stat(file.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        static_cast<uint64_t>(st.st_size) > max_bytes) {
      text.resize(max_bytes + 1);  // only the size matters
    } else {
      std::ifstream in(file, std::ios::binary);
      if (!in) return InvalidError(what + "cannot read the file");
      std::stringstream all;
      all << in.rdbuf();
      text = all.str();
    }
  }
  if (text.size() > max_bytes) {
    const std::string cap = "the " + std::to_string(max_bytes) +
                            " bytes one apply may carry: split it into several files";
    struct stat st {};
    if (file == "-" || ::stat(file.c_str(), &st) != 0) {
      return InvalidError(what + "holds more than " + cap);
    }
    return InvalidError(what + std::to_string(st.st_size) + " bytes, more than " + cap);
  }
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) {
    return InvalidError(what + (file == "-" ? "stdin" : "the file") +
                        " is empty: nothing to apply");
  }
  if (const size_t bad = FirstInvalidUtf8(text); bad != std::string::npos) {
    const std::string_view before(text.data(), bad);
    const size_t line = static_cast<size_t>(std::count(before.begin(), before.end(), '\n')) + 1;
    const size_t line_start = before.rfind('\n');
    const size_t column = line_start == std::string_view::npos ? bad + 1 : bad - line_start;
    char byte[8];
    std::snprintf(byte, sizeof byte, "0x%02x", static_cast<unsigned char>(text[bad]));
    return InvalidError(what + "not UTF-8 text: byte " + byte + " at line " + std::to_string(line) +
                        ", column " + std::to_string(column) + " (YAML files must be UTF-8)");
  }
  return text;
}

}  // namespace trainlet::cli
