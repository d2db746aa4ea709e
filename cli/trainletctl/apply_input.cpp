#include "trainletctl/apply_input.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <vector>

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

namespace {

// `file` ("-": stdin) whole, or one byte past `max_bytes` when it holds more. Errors start `what`.
Result<std::string> ReadCapped(const std::string& file, size_t max_bytes, const std::string& what) {
  std::string text;
  if (file == "-") {
    // Read one byte past the cap at most, so a huge pipe is refused without being held.
    text.resize(max_bytes + 1);
    std::cin.read(text.data(), static_cast<std::streamsize>(text.size()));
    text.resize(static_cast<size_t>(std::cin.gcount()));
    return text;
  }
  struct stat st {};
  if (::stat(file.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
      static_cast<uint64_t>(st.st_size) > max_bytes) {
    text.resize(max_bytes + 1);  // only the size matters
    return text;
  }
  std::ifstream in(file, std::ios::binary);
  if (!in) return InvalidError(what + "cannot read the file");
  std::stringstream all;
  all << in.rdbuf();
  return all.str();
}

bool Blank(const std::string& text) {
  return text.find_first_not_of(" \t\r\n") == std::string::npos;
}

// Not UTF-8: where, as "-f FILE: not UTF-8 text: byte 0xff at line 3, column 7 (...)".
Status CheckUtf8(const std::string& text, const std::string& what) {
  const size_t bad = FirstInvalidUtf8(text);
  if (bad == std::string::npos) return Status::Ok();
  const std::string_view before(text.data(), bad);
  const size_t line = static_cast<size_t>(std::count(before.begin(), before.end(), '\n')) + 1;
  const size_t line_start = before.rfind('\n');
  const size_t column = line_start == std::string_view::npos ? bad + 1 : bad - line_start;
  char byte[8];
  std::snprintf(byte, sizeof byte, "0x%02x", static_cast<unsigned char>(text[bad]));
  return InvalidError(what + "not UTF-8 text: byte " + byte + " at line " + std::to_string(line) +
                      ", column " + std::to_string(column) + " (YAML files must be UTF-8)");
}

// What one apply may carry, and what to do about more.
std::string Cap(size_t max_bytes) {
  return "the " + std::to_string(max_bytes) +
         " bytes one apply may carry: split it into several files";
}

// As kubectl apply -f DIR: every .yaml, .yml and .json file directly in it (not below), in name
// order, as one multi-document text. Empty files are skipped; a file that cannot be read or is
// not UTF-8 fails the whole apply, naming that file.
Result<std::string> ReadApplyDirectory(const std::string& dir, size_t max_bytes) {
  namespace fs = std::filesystem;
  const std::string what = "-f " + dir + ": ";
  std::vector<fs::path> files;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string ext = it->path().extension().string();
    std::error_code kind;
    if ((ext == ".yaml" || ext == ".yml" || ext == ".json") && it->is_regular_file(kind)) {
      files.push_back(it->path());
    }
  }
  if (ec) return InvalidError(what + "cannot read the directory: " + ec.message());
  std::sort(files.begin(), files.end());
  std::string text;
  for (const fs::path& file : files) {
    const std::string one_what = "-f " + file.string() + ": ";
    TRAINLET_ASSIGN_OR_RETURN(std::string one, ReadCapped(file.string(), max_bytes, one_what));
    if (Blank(one)) continue;
    TRAINLET_RETURN_IF_ERROR(CheckUtf8(one, one_what));
    text += "---\n";
    text += one;
    if (text.back() != '\n') text += '\n';
    if (text.size() > max_bytes) return InvalidError(what + "holds more than " + Cap(max_bytes));
  }
  if (text.empty()) {
    return InvalidError(what +
                        "no .yaml, .yml or .json file in the directory holds anything: "
                        "nothing to apply");
  }
  return text;
}

}  // namespace

Result<std::string> ReadApplyInput(const std::string& file, size_t max_bytes) {
  const std::string what = "-f " + file + ": ";
  if (std::error_code ec; file != "-" && std::filesystem::is_directory(file, ec)) {
    return ReadApplyDirectory(file, max_bytes);
  }
  TRAINLET_ASSIGN_OR_RETURN(std::string text, ReadCapped(file, max_bytes, what));
  if (text.size() > max_bytes) {
    struct stat st {};
    if (file == "-" || ::stat(file.c_str(), &st) != 0) {
      return InvalidError(what + "holds more than " + Cap(max_bytes));
    }
    return InvalidError(what + std::to_string(st.st_size) + " bytes, more than " + Cap(max_bytes));
  }
  if (Blank(text)) {
    return InvalidError(what + (file == "-" ? "stdin" : "the file") +
                        " is empty: nothing to apply");
  }
  TRAINLET_RETURN_IF_ERROR(CheckUtf8(text, what));
  return text;
}

}  // namespace trainlet::cli
