#include "common/trainjob/yaml_support.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <sstream>
#include <unordered_map>

#include "common/trainjob/yaml_event_loader.h"

namespace trainlet::trainjob {
namespace {

bool IsDigits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

bool IsCoreBool(std::string_view s) {
  return s == "true" || s == "True" || s == "TRUE" || s == "false" || s == "False" || s == "FALSE";
}

bool IsCoreInt(std::string_view s) {
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) s.remove_prefix(1);
  return IsDigits(s);
}

// [-+]? ( \. [0-9]+ | [0-9]+ ( \. [0-9]* )? ) ( [eE] [-+]? [0-9]+ )?  and the .inf / .nan forms.
bool IsCoreFloat(std::string_view s) {
  std::string_view body = s;
  if (!body.empty() && (body[0] == '-' || body[0] == '+')) body.remove_prefix(1);
  if (body == ".inf" || body == ".Inf" || body == ".INF") return true;
  if (s == ".nan" || s == ".NaN" || s == ".NAN") return true;
  size_t i = 0;
  size_t int_digits = 0;
  while (i < body.size() && body[i] >= '0' && body[i] <= '9') ++i, ++int_digits;
  size_t frac_digits = 0;
  if (i < body.size() && body[i] == '.') {
    ++i;
    while (i < body.size() && body[i] >= '0' && body[i] <= '9') ++i, ++frac_digits;
  }
  if (int_digits == 0 && frac_digits == 0) return false;
  if (i < body.size() && (body[i] == 'e' || body[i] == 'E')) {
    ++i;
    if (i < body.size() && (body[i] == '-' || body[i] == '+')) ++i;
    if (!IsDigits(body.substr(i))) return false;
    return true;
  }
  return i == body.size();
}

// How a plain (unquoted, untagged) scalar resolves.
YamlKind ResolvePlain(std::string_view s) {
  if (IsNullText(s)) return YamlKind::kNull;
  if (IsCoreBool(s)) return YamlKind::kBool;
  if (IsCoreInt(s)) return YamlKind::kInt;
  if (IsCoreFloat(s)) return YamlKind::kFloat;
  return YamlKind::kString;
}

bool IsIdentifier(std::string_view key) {
  if (key.empty()) return false;
  for (char c : key) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

// Walks `node` as the tree it expands to, following aliases, within the depth and node caps.
bool WithinExpansionLimits(const YAML::Node& node, int depth, int64_t* budget) {
  if (--*budget < 0 || depth > kMaxYamlDepth) return false;
  if (node.IsMap()) {
    for (auto it = node.begin(); it != node.end(); ++it) {
      if (!WithinExpansionLimits(it->first, depth + 1, budget)) return false;
      if (!WithinExpansionLimits(it->second, depth + 1, budget)) return false;
    }
  } else if (node.IsSequence()) {
    for (auto it = node.begin(); it != node.end(); ++it) {
      if (!WithinExpansionLimits(*it, depth + 1, budget)) return false;
    }
  }
  return true;
}

bool NeedsQuotes(const std::string& s) { return ResolvePlain(s) != YamlKind::kString; }

// Literal block style reads back exactly only for text yaml-cpp writes with the default "clip"
// chomping: one trailing newline, no leading blank on the first line, nothing unprintable.
bool SuitsLiteral(const std::string& s) {
  if (s.size() < 2 || s.back() != '\n' || s[s.size() - 2] == '\n') return false;
  if (s[0] == ' ' || s[0] == '\t' || s[0] == '\n') return false;
  for (unsigned char c : s) {
    if ((c < 0x20 && c != '\n') || c == 0x7f) return false;
  }
  return true;
}

void EmitNode(YAML::Emitter& out, const YAML::Node& node, bool is_key) {
  switch (node.Type()) {
    case YAML::NodeType::Map:
      out << YAML::BeginMap;
      for (auto it = node.begin(); it != node.end(); ++it) {
        // YAML limits implicit keys to 1024 characters on one line; others need "? key".
        const bool long_key = !it->first.IsScalar() || it->first.Scalar().size() > 512 ||
                              it->first.Scalar().find('\n') != std::string::npos;
        if (long_key) out << YAML::LongKey;
        out << YAML::Key;
        EmitNode(out, it->first, true);
        out << YAML::Value;
        EmitNode(out, it->second, false);
      }
      out << YAML::EndMap;
      return;
    case YAML::NodeType::Sequence:
      out << YAML::BeginSeq;
      for (auto it = node.begin(); it != node.end(); ++it) EmitNode(out, *it, false);
      out << YAML::EndSeq;
      return;
    case YAML::NodeType::Scalar: {
      const std::string& text = node.Scalar();
      YamlKind kind = is_key ? YamlKind::kString : Classify(node);
      // A tagged scalar with no text (`spec: !x`) reads as null; written as its empty text it
      // would come back a string "" (found by kueue_parser_fuzz).
      if (kind == YamlKind::kNull) {
        out << YAML::Null;
      } else if (kind != YamlKind::kString) {
        out << text;
      } else if (!is_key && text.find('\n') != std::string::npos && SuitsLiteral(text)) {
        out << YAML::Literal << text;
      } else if (NeedsQuotes(text) || text.find('\n') != std::string::npos) {
        out << YAML::DoubleQuoted << text;
      } else {
        out << text;
      }
      return;
    }
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      out << YAML::Null;
      return;
  }
}

// YAML's c-printable set: tab, line breaks and the printable characters of Unicode.
bool IsYamlPrintable(uint32_t cp) {
  return cp == 0x09 || cp == 0x0A || cp == 0x0D || (cp >= 0x20 && cp <= 0x7E) || cp == 0x85 ||
         (cp >= 0xA0 && cp <= 0xD7FF) || (cp >= 0xE000 && cp <= 0xFFFD) ||
         (cp >= 0x10000 && cp <= 0x10FFFF);
}

// Offset of the first byte that is not UTF-8 (overlongs and surrogates included) or that starts
// a character YAML does not allow (control characters: yaml-cpp turns a NUL into garbage), or
// npos.
size_t FindInvalidText(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      if (!IsYamlPrintable(c)) return i;
      ++i;
      continue;
    }
    size_t len = 0;
    uint32_t cp = 0;
    if ((c & 0xE0) == 0xC0) {
      len = 2, cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3, cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4, cp = c & 0x07;
    } else {
      return i;
    }
    if (i + len > s.size()) return i;
    for (size_t k = 1; k < len; ++k) {
      unsigned char cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) return i;
      cp = (cp << 6) | (cc & 0x3F);
    }
    static constexpr uint32_t kMinForLength[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMinForLength[len] || !IsYamlPrintable(cp)) return i;
    i += len;
  }
  return std::string_view::npos;
}

// EmitYaml's fast path: the same bytes yaml-cpp's Emitter writes (indent 2, block style) for a
// tree whose every scalar is printable ASCII that yaml-cpp would write plain, or that EmitNode
// double-quotes and that needs no escape; false for anything else (non-ASCII, a line break, a
// quote or backslash in a quoted string, a scalar yaml-cpp's own checks might quote, a key that
// is not a short scalar), which EmitNode then writes. Byte for byte matters: re-applying an
// unchanged object is recognised by comparing this text with the stored one. yaml-cpp decides
// plain or quoted per character with its RegEx matchers, twice the cost of parsing the file.
class BlockWriter {
 public:
  bool Top(const YAML::Node& node) {
    if (node.IsMap() && node.size() > 0) return Map(node, 0);
    if (node.IsSequence() && node.size() > 0) return Seq(node, 0);
    return Inline(node, false);
  }
  std::string Take() { return std::move(out_); }

 private:
  // A plain scalar yaml-cpp also writes plain: it starts with a letter, digit, '.', '/' or '_',
  // or with '-' before another character that is not a space; then letters, digits, spaces and
  // ._/-+=,@()~ and ':' (each ':' before a character that is not a space); no trailing space.
  static bool PlainAsYamlCppWrites(const std::string& s) {
    if (s.empty() || s.back() == ' ') return false;
    const auto word = [](char c) {
      return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
             c == '.' || c == '/' || c == '_';
    };
    if (!word(s[0]) && !(s[0] == '-' && s.size() > 1 && s[1] != ' ')) return false;
    for (size_t i = 1; i < s.size(); ++i) {
      const char c = s[i];
      if (word(c) || c == ' ' || c == '-' || c == '+' || c == '=' || c == ',' || c == '@' ||
          c == '(' || c == ')' || c == '~') {
        continue;
      }
      if (c == ':' && i + 1 < s.size() && s[i + 1] != ' ') continue;
      return false;
    }
    return true;
  }
  // Printable ASCII that a double-quoted scalar holds unescaped.
  static bool QuotesAsIs(const std::string& s) {
    for (char c : s) {
      if (c < 0x20 || c > 0x7e || c == '"' || c == '\\') return false;
    }
    return true;
  }
  bool Scalar(const std::string& text, bool quoted) {
    if (quoted) {
      if (!QuotesAsIs(text)) return false;
      out_ += '"';
      out_ += text;
      out_ += '"';
      return true;
    }
    if (!PlainAsYamlCppWrites(text)) return false;
    out_ += text;
    return true;
  }
  // A node written on the line it starts (after "key: " or "- "), as EmitNode writes it.
  bool Inline(const YAML::Node& node, bool is_key) {
    switch (node.Type()) {
      case YAML::NodeType::Map:
        if (node.size() > 0) return false;
        out_ += "{}";
        return true;
      case YAML::NodeType::Sequence:
        if (node.size() > 0) return false;
        out_ += "[]";
        return true;
      case YAML::NodeType::Scalar: {
        const std::string& text = node.Scalar();
        const YamlKind kind = is_key ? YamlKind::kString : Classify(node);
        if (kind == YamlKind::kNull) {
          out_ += '~';
          return true;
        }
        if (kind != YamlKind::kString) return Scalar(text, false);
        if (text.find('\n') != std::string::npos) return false;  // literal, or escaped
        return Scalar(text, NeedsQuotes(text));
      }
      case YAML::NodeType::Null:
      case YAML::NodeType::Undefined:
        out_ += '~';
        return true;
    }
    return false;
  }
  void NewLine(size_t column) {
    out_ += '\n';
    out_.append(column, ' ');
  }
  // The value of a key at `column`: on the key's line when inline, else from the next line,
  // two columns in (an empty collection too, as yaml-cpp writes it).
  bool Value(const YAML::Node& value, size_t column) {
    const bool block = (value.IsMap() || value.IsSequence());
    if (!block) {
      out_ += ' ';
      return Inline(value, false);
    }
    NewLine(column + 2);
    if (value.size() == 0) return Inline(value, false);
    return value.IsMap() ? Map(value, column + 2) : Seq(value, column + 2);
  }
  // A block map (or sequence) at `column`: its first key (or item) where the output is, its line
  // and indent written already; the others on new lines.
  bool Map(const YAML::Node& node, size_t column) {
    bool first = true;
    for (const auto& entry : node) {
      if (!first) NewLine(column);
      first = false;
      if (!entry.first.IsScalar() || entry.first.Scalar().size() > 512) return false;
      if (!Inline(entry.first, true)) return false;
      out_ += ':';
      if (!Value(entry.second, column)) return false;
    }
    return true;
  }
  bool Seq(const YAML::Node& node, size_t column) {
    bool first = true;
    for (const auto& item : node) {
      if (!first) NewLine(column);
      first = false;
      out_ += '-';
      if (item.IsMap() && item.size() > 0) {
        out_ += ' ';
        if (!Map(item, column + 2)) return false;
      } else if (item.IsSequence()) {
        NewLine(column + 2);
        if (item.size() == 0) {
          out_ += "[]";
        } else if (!Seq(item, column + 2)) {
          return false;
        }
      } else {
        out_ += ' ';
        if (!Inline(item, false)) return false;
      }
    }
    return true;
  }

  std::string out_;
};

}  // namespace

bool IsNullText(std::string_view s) {
  return s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL";
}

YamlKind Classify(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map:
      return YamlKind::kObject;
    case YAML::NodeType::Sequence:
      return YamlKind::kArray;
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      return YamlKind::kNull;
    case YAML::NodeType::Scalar:
      break;
  }
  const std::string& tag = node.Tag();
  if (tag == "!" || tag == "tag:yaml.org,2002:str") return YamlKind::kString;
  if (tag == "tag:yaml.org,2002:int") return YamlKind::kInt;
  if (tag == "tag:yaml.org,2002:float") return YamlKind::kFloat;
  if (tag == "tag:yaml.org,2002:bool") return YamlKind::kBool;
  // Plain scalars ("?") and unknown local tags resolve by their text.
  return ResolvePlain(node.Scalar());
}

const char* YamlKindName(YamlKind kind) {
  switch (kind) {
    case YamlKind::kNull:
      return "null";
    case YamlKind::kBool:
      return "boolean";
    case YamlKind::kInt:
      return "integer";
    case YamlKind::kFloat:
      return "number";
    case YamlKind::kString:
      return "string";
    case YamlKind::kObject:
      return "object";
    case YamlKind::kArray:
      return "array";
  }
  return "?";
}

std::string QuoteForMessage(std::string_view s) {
  constexpr size_t kMaxShown = 80;
  std::string out = "\"";
  for (size_t i = 0; i < s.size() && i < kMaxShown; ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  if (s.size() > kMaxShown) out += "...";
  out += '"';
  return out;
}

std::string DescribeValue(const YAML::Node& node) {
  YamlKind kind = Classify(node);
  switch (kind) {
    case YamlKind::kString:
      return QuoteForMessage(node.Scalar());
    case YamlKind::kBool:
    case YamlKind::kInt:
    case YamlKind::kFloat: {
      const std::string& s = node.Scalar();
      return s.size() > 40 ? s.substr(0, 40) + "..." : s;
    }
    case YamlKind::kNull:
      return "null";
    case YamlKind::kObject:
      return "an object";
    case YamlKind::kArray:
      return "an array";
  }
  return "?";
}

std::optional<int64_t> ParseInt64(std::string_view s) {
  if (!s.empty() && s[0] == '+') s.remove_prefix(1);
  if (s.empty()) return std::nullopt;
  int64_t value = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec != std::errc() || ptr != s.data() + s.size()) return std::nullopt;
  return value;
}

YAML::Node MapGet(const YAML::Node& node, std::string_view key) {
  if (!node.IsMap()) return YAML::Node(YAML::NodeType::Undefined);
  for (auto it = node.begin(); it != node.end(); ++it) {
    if (it->first.IsScalar() && it->first.Scalar() == key) return it->second;
  }
  return YAML::Node(YAML::NodeType::Undefined);
}

bool IsSet(const YAML::Node& node) { return node.IsDefined() && !node.IsNull(); }

std::string ScalarText(const YAML::Node& node) {
  return node.IsScalar() ? node.Scalar() : std::string();
}

std::vector<std::string> ScalarList(const YAML::Node& node) {
  std::vector<std::string> out;
  if (!node.IsSequence()) return out;
  for (auto it = node.begin(); it != node.end(); ++it) out.push_back(ScalarText(*it));
  return out;
}

std::string AppendKey(const std::string& path, std::string_view key) {
  if (!IsIdentifier(key)) return path + "[" + std::string(key) + "]";
  if (path.empty()) return std::string(key);
  return path + "." + std::string(key);
}

std::string AppendIndex(const std::string& path, size_t index) {
  return path + "[" + std::to_string(index) + "]";
}

Result<std::vector<YamlDocument>> LoadDocuments(std::string_view text) {
  if (text.size() > kMaxYamlBytes) {
    return InvalidError("input is " + std::to_string(text.size()) + " bytes, over the limit of " +
                        std::to_string(kMaxYamlBytes) + " bytes");
  }
  // Kubernetes objects are JSON, hence UTF-8; a YAML parser would also read UTF-16 after a byte
  // order mark, which no TrainJob file needs.
  if (size_t bad = FindInvalidText(text); bad != std::string_view::npos) {
    size_t line = 1 + static_cast<size_t>(std::count(text.begin(), text.begin() + bad, '\n'));
    size_t line_start = text.rfind('\n', bad);  // text[bad] is not a newline
    size_t column = line_start == std::string_view::npos ? bad + 1 : bad - line_start;
    return InvalidError("line " + std::to_string(line) + ", column " + std::to_string(column) +
                        ": not printable UTF-8 (control characters other than tab and line breaks "
                        "are not allowed)");
  }
  Result<YamlStream> stream = ParseYamlStream(text);
  if (!stream.ok()) return stream.status();
  std::vector<YAML::Node>& nodes = stream->documents;

  std::vector<YamlDocument> docs;
  docs.reserve(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    int index = static_cast<int>(i) + 1;
    if (stream->has_alias) {
      int64_t budget = kMaxYamlNodes;
      if (!WithinExpansionLimits(nodes[i], 0, &budget)) {
        return InvalidError("document " + std::to_string(index) +
                            ": aliases expand past the limits (" + std::to_string(kMaxYamlNodes) +
                            " nodes, " + std::to_string(kMaxYamlDepth) + " levels)");
      }
    }
    docs.push_back({index, nodes[i]});
  }
  return docs;
}

std::string EmitYaml(const YAML::Node& node) {
  if (BlockWriter fast; fast.Top(node)) return fast.Take() + "\n";
  return EmitYamlWithYamlCpp(node);
}

std::string EmitYamlWithYamlCpp(const YAML::Node& node) {
  YAML::Emitter out;
  out.SetIndent(2);
  EmitNode(out, node, false);
  std::string text = out.c_str();
  if (!text.empty() && text.back() != '\n') text += '\n';
  return text;
}

}  // namespace trainlet::trainjob
