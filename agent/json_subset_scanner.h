// ScanJsonSubset: the JSON a progress post almost always is, read in one pass without nlohmann's
// lexer, feeding the same SAX events (start_object, key, string, number_unsigned, ...) to the same
// handler. bench/progress measured nlohmann's SAX parse of the SDK's ~200-byte body at about 3 us
// (a tenth of the agent's CPU per post, its lexer reading one character at a time through its
// input adapter and growing a token string); this reads it in a few hundred ns.
//
// It covers a subset, and a value in it gets exactly the events nlohmann would give it:
//   - objects and arrays, at most kMaxJsonSubsetDepth deep, whose top is an object;
//   - strings of printable ASCII (0x20-0x7f) without escapes;
//   - integers of at most 18 digits, without leading zeros, fraction or exponent: without a
//     sign number_unsigned, with a minus number_integer (as nlohmann: "-0" too);
//   - true, false and null; the whitespace JSON allows (space, tab, CR, LF) between tokens.
// Anything else (an escape, a byte outside printable ASCII, a float, a longer integer, a byte
// order mark, deeper nesting, invalid JSON, a handler returning false) returns false at once,
// having fed the handler some events: the caller then parses again from the start, with a fresh
// handler, through nlohmann (which also gives the error for invalid JSON). So the result of a
// parse never depends on which path read the body; progress_body_test and
// fuzz/progress_body_fuzz.cpp compare the two on every input they try.
// Pure; any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace trainlet::agent {

inline constexpr size_t kMaxJsonSubsetDepth = 16;

// True: `text` was in the subset and `sax` has had all its events. False: see above.
template <class Sax>
bool ScanJsonSubset(std::string_view text, Sax* sax) {
  const char* p = text.data();
  const char* const end = p + text.size();
  char open[kMaxJsonSubsetDepth];  // '{' or '[' of each object or array being read
  size_t depth = 0;
  std::string token;  // the last string or key; the handler may move it away
  auto skip_space = [&] {
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) ++p;
  };
  auto read_string = [&] {  // at '"'
    const char* const begin = ++p;
    for (; p < end; ++p) {
      const auto c = static_cast<unsigned char>(*p);
      if (c == '"') {
        token.assign(begin, static_cast<size_t>(p - begin));
        ++p;
        return true;
      }
      if (c < 0x20 || c > 0x7f || c == '\\') return false;
    }
    return false;
  };
  auto literal = [&](std::string_view word) {
    if (static_cast<size_t>(end - p) < word.size() || std::string_view(p, word.size()) != word) {
      return false;
    }
    p += word.size();
    return true;
  };
  enum class Next { kValue, kKey, kAfterValue } next = Next::kValue;
  skip_space();
  if (p == end || *p != '{') return false;
  for (;;) {
    skip_space();
    if (next == Next::kKey) {  // after '{' or a ',' in an object
      if (p == end || *p != '"' || !read_string() || !sax->key(token)) return false;
      skip_space();
      if (p == end || *p != ':') return false;
      ++p;
      next = Next::kValue;
      continue;
    }
    if (next == Next::kAfterValue) {
      if (depth == 0) return p == end;  // the top object ended: only whitespace may follow
      if (p == end) return false;
      const bool in_object = open[depth - 1] == '{';
      if (*p == ',') {
        ++p;
        next = in_object ? Next::kKey : Next::kValue;
      } else if (*p == (in_object ? '}' : ']')) {
        ++p;
        --depth;
        if (!(in_object ? sax->end_object() : sax->end_array())) return false;
      } else {
        return false;
      }
      continue;
    }
    if (p == end) return false;
    next = Next::kAfterValue;
    switch (*p) {
      case '{':
      case '[': {
        const bool object = *p == '{';
        if (depth == kMaxJsonSubsetDepth) return false;
        if (!(object ? sax->start_object(static_cast<size_t>(-1))
                     : sax->start_array(static_cast<size_t>(-1)))) {
          return false;
        }
        open[depth++] = *p++;
        skip_space();
        if (p < end && *p == (object ? '}' : ']')) {  // empty
          ++p;
          --depth;
          if (!(object ? sax->end_object() : sax->end_array())) return false;
        } else {
          next = object ? Next::kKey : Next::kValue;
        }
        break;
      }
      case '"':
        if (!read_string() || !sax->string(token)) return false;
        break;
      case 't':
        if (!literal("true") || !sax->boolean(true)) return false;
        break;
      case 'f':
        if (!literal("false") || !sax->boolean(false)) return false;
        break;
      case 'n':
        if (!literal("null") || !sax->null()) return false;
        break;
      default: {
        const bool negative = *p == '-';
        if (negative) ++p;
        const char* const digits = p;
        uint64_t value = 0;
        for (; p < end && *p >= '0' && *p <= '9'; ++p) value = value * 10 + (*p - '0');
        const auto n = static_cast<size_t>(p - digits);
        // Not a number, a leading zero ("01": invalid), more than 18 digits (may not fit), or a
        // fraction or exponent: nlohmann's.
        if (n == 0 || n > 18 || (n > 1 && *digits == '0') ||
            (p < end && (*p == '.' || *p == 'e' || *p == 'E'))) {
          return false;
        }
        if (!(negative ? sax->number_integer(-static_cast<int64_t>(value))
                       : sax->number_unsigned(value))) {
          return false;
        }
        break;
      }
    }
  }
}

}  // namespace trainlet::agent
