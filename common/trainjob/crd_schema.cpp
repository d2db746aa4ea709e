#include "common/trainjob/crd_schema.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iterator>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <set>

#include "common/trainjob/embedded_schemas.h"
#include "common/trainjob/yaml_support.h"

namespace trainlet::trainjob {

using Json = nlohmann::json;

// A simple x-kubernetes-validations rule, recognised by its text.
struct SchemaRule {
  enum class Kind { kCompare, kIn, kMatches };
  Kind kind = Kind::kCompare;
  std::string op;                   // kCompare: >=, >, <=, <, ==, !=
  double bound = 0;                 // kCompare
  std::vector<std::string> values;  // kIn
  std::regex re;                    // kMatches
  bool allow_empty = false;         // kMatches: `self == '' || ...`
  std::string message;
};

struct SchemaNode {
  enum class Type { kAny, kObject, kArray, kString, kInteger, kNumber, kBoolean };
  enum class Format { kNone, kInt32, kInt64 };

  Type type = Type::kAny;
  Format format = Format::kNone;
  std::map<std::string, std::unique_ptr<SchemaNode>, std::less<>> properties;
  std::vector<std::string> required;
  std::unique_ptr<SchemaNode> items;
  std::unique_ptr<SchemaNode> additional;  // additionalProperties as a schema
  bool additional_any = false;             // additionalProperties: true
  bool preserve_unknown = false;
  bool int_or_string = false;
  bool nullable = false;
  bool has_enum = false;
  std::vector<std::string> enum_values;  // strings as themselves, other JSON values dumped
  std::optional<double> minimum, maximum;
  bool exclusive_minimum = false, exclusive_maximum = false;
  std::optional<int64_t> min_length, max_length, min_items, max_items, min_properties,
      max_properties;
  std::string pattern_text;
  std::optional<std::regex> pattern;
  std::vector<SchemaRule> rules;
  std::vector<std::unique_ptr<SchemaNode>> any_of;
};

namespace {

// libstdc++'s regex matcher recurses per character: a long enough string would exhaust the
// stack. Values that carry a pattern in these CRDs (quantities, URIs) are short.
constexpr size_t kMaxPatternInput = 1024;

Status SchemaError(const std::string& spath, const std::string& what) {
  return InternalError("CRD schema " + (spath.empty() ? std::string("(root)") : spath) + ": " +
                       what);
}

Status ReadCount(const Json& j, const char* key, const std::string& spath,
                 std::optional<int64_t>* out) {
  auto it = j.find(key);
  if (it == j.end()) return Status::Ok();
  if (!it->is_number_integer()) return SchemaError(spath, std::string(key) + " is not an integer");
  *out = it->get<int64_t>();
  return Status::Ok();
}

Status ReadBound(const Json& j, const char* key, const std::string& spath,
                 std::optional<double>* out) {
  auto it = j.find(key);
  if (it == j.end()) return Status::Ok();
  if (!it->is_number()) return SchemaError(spath, std::string(key) + " is not a number");
  *out = it->get<double>();
  return Status::Ok();
}

bool ReadFlag(const Json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_boolean() && it->get<bool>();
}

// Recognises the rule shapes listed in crd_schema.h; others (transition rules such as
// `self == oldSelf`, rules over several fields) return nullopt and are not checked.
std::optional<SchemaRule> ParseRule(const std::string& rule, const std::string& message) {
  static const std::regex kCompare(R"(^\s*self\s*(>=|<=|==|!=|>|<)\s*(-?[0-9]+(\.[0-9]+)?)\s*$)");
  static const std::regex kIn(R"(^\s*self\s+in\s+\[(.*)\]\s*$)");
  static const std::regex kQuoted(R"('([^']*)')");
  static const std::regex kMatches(R"(^\s*(self\s*==\s*''\s*\|\|\s*)?self\.matches\('(.*)'\)\s*$)");
  SchemaRule out;
  out.message = message.empty() ? "failed rule " + rule : message;
  std::smatch m;
  if (std::regex_match(rule, m, kCompare)) {
    out.kind = SchemaRule::Kind::kCompare;
    out.op = m[1].str();
    out.bound = std::strtod(m[2].str().c_str(), nullptr);
    return out;
  }
  if (std::regex_match(rule, m, kIn)) {
    out.kind = SchemaRule::Kind::kIn;
    std::string list = m[1].str();
    for (auto it = std::sregex_iterator(list.begin(), list.end(), kQuoted);
         it != std::sregex_iterator(); ++it) {
      out.values.push_back((*it)[1].str());
    }
    return out;
  }
  if (std::regex_match(rule, m, kMatches)) {
    out.kind = SchemaRule::Kind::kMatches;
    out.allow_empty = m[1].matched;
    try {
      out.re = std::regex(m[2].str(), std::regex::ECMAScript);
    } catch (const std::regex_error&) {
      return std::nullopt;  // RE2 syntax std::regex lacks: leave the rule to the API server
    }
    return out;
  }
  return std::nullopt;
}

Status CompileNode(const Json& j, const std::string& spath, SchemaNode* out);

// "type" and "format".
Status CompileType(const Json& j, const std::string& spath, SchemaNode* out) {
  if (auto it = j.find("type"); it != j.end()) {
    if (!it->is_string()) return SchemaError(spath, "type is not a string");
    static const std::map<std::string, SchemaNode::Type, std::less<>> kTypes = {
        {"object", SchemaNode::Type::kObject}, {"array", SchemaNode::Type::kArray},
        {"string", SchemaNode::Type::kString}, {"integer", SchemaNode::Type::kInteger},
        {"number", SchemaNode::Type::kNumber}, {"boolean", SchemaNode::Type::kBoolean}};
    auto t = kTypes.find(it->get<std::string>());
    if (t == kTypes.end()) return SchemaError(spath, "unknown type " + it->dump());
    out->type = t->second;
  }
  if (auto it = j.find("format"); it != j.end() && it->is_string()) {
    if (*it == "int32") out->format = SchemaNode::Format::kInt32;
    if (*it == "int64") out->format = SchemaNode::Format::kInt64;
  }
  return Status::Ok();
}

// The keywords that hold sub-schemas, compiled recursively, and "required".
Status CompileChildren(const Json& j, const std::string& spath, SchemaNode* out) {
  if (auto it = j.find("properties"); it != j.end()) {
    if (!it->is_object()) return SchemaError(spath, "properties is not an object");
    for (const auto& [name, sub] : it->items()) {
      auto node = std::make_unique<SchemaNode>();
      TRAINLET_RETURN_IF_ERROR(CompileNode(sub, spath + ".properties." + name, node.get()));
      out->properties.emplace(name, std::move(node));
    }
  }
  if (auto it = j.find("required"); it != j.end()) {
    if (!it->is_array()) return SchemaError(spath, "required is not an array");
    for (const auto& r : *it) {
      if (!r.is_string()) return SchemaError(spath, "required holds a non-string");
      out->required.push_back(r.get<std::string>());
    }
  }
  if (auto it = j.find("items"); it != j.end()) {
    out->items = std::make_unique<SchemaNode>();
    TRAINLET_RETURN_IF_ERROR(CompileNode(*it, spath + ".items", out->items.get()));
  }
  if (auto it = j.find("additionalProperties"); it != j.end()) {
    if (it->is_boolean()) {
      out->additional_any = it->get<bool>();
    } else {
      out->additional = std::make_unique<SchemaNode>();
      TRAINLET_RETURN_IF_ERROR(
          CompileNode(*it, spath + ".additionalProperties", out->additional.get()));
    }
  }
  if (auto it = j.find("anyOf"); it != j.end()) {
    if (!it->is_array()) return SchemaError(spath, "anyOf is not an array");
    for (size_t i = 0; i < it->size(); ++i) {
      auto node = std::make_unique<SchemaNode>();
      TRAINLET_RETURN_IF_ERROR(
          CompileNode((*it)[i], spath + ".anyOf[" + std::to_string(i) + "]", node.get()));
      out->any_of.push_back(std::move(node));
    }
  }
  return Status::Ok();
}

// "enum", the Kubernetes flags, the numeric and size bounds, and "pattern".
Status CompileValueConstraints(const Json& j, const std::string& spath, SchemaNode* out) {
  if (auto it = j.find("enum"); it != j.end()) {
    if (!it->is_array()) return SchemaError(spath, "enum is not an array");
    out->has_enum = true;
    for (const auto& v : *it)
      out->enum_values.push_back(v.is_string() ? v.get<std::string>() : v.dump());
  }
  out->preserve_unknown = ReadFlag(j, "x-kubernetes-preserve-unknown-fields");
  out->int_or_string = ReadFlag(j, "x-kubernetes-int-or-string");
  out->nullable = ReadFlag(j, "nullable");
  out->exclusive_minimum = ReadFlag(j, "exclusiveMinimum");
  out->exclusive_maximum = ReadFlag(j, "exclusiveMaximum");
  TRAINLET_RETURN_IF_ERROR(ReadBound(j, "minimum", spath, &out->minimum));
  TRAINLET_RETURN_IF_ERROR(ReadBound(j, "maximum", spath, &out->maximum));
  TRAINLET_RETURN_IF_ERROR(ReadCount(j, "minLength", spath, &out->min_length));
  TRAINLET_RETURN_IF_ERROR(ReadCount(j, "maxLength", spath, &out->max_length));
  TRAINLET_RETURN_IF_ERROR(ReadCount(j, "minItems", spath, &out->min_items));
  TRAINLET_RETURN_IF_ERROR(ReadCount(j, "maxItems", spath, &out->max_items));
  TRAINLET_RETURN_IF_ERROR(ReadCount(j, "minProperties", spath, &out->min_properties));
  TRAINLET_RETURN_IF_ERROR(ReadCount(j, "maxProperties", spath, &out->max_properties));
  if (auto it = j.find("pattern"); it != j.end()) {
    if (!it->is_string()) return SchemaError(spath, "pattern is not a string");
    out->pattern_text = it->get<std::string>();
    try {
      out->pattern.emplace(out->pattern_text, std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
      return SchemaError(spath, "pattern " + out->pattern_text + " does not compile: " + e.what());
    }
  }
  return Status::Ok();
}

// "x-kubernetes-validations": the CEL rules ParseRule understands; the rest are left to the API
// server.
void CompileRules(const Json& j, SchemaNode* out) {
  if (auto it = j.find("x-kubernetes-validations"); it != j.end() && it->is_array()) {
    for (const auto& v : *it) {
      if (!v.is_object() || !v.contains("rule") || !v["rule"].is_string()) continue;
      std::string message = v.contains("message") && v["message"].is_string()
                                ? v["message"].get<std::string>()
                                : std::string();
      if (auto rule = ParseRule(v["rule"].get<std::string>(), message)) {
        out->rules.push_back(std::move(*rule));
      }
    }
  }
}

Status CompileNode(const Json& j, const std::string& spath, SchemaNode* out) {
  if (!j.is_object()) return SchemaError(spath, "is not an object");
  TRAINLET_RETURN_IF_ERROR(CompileType(j, spath, out));
  TRAINLET_RETURN_IF_ERROR(CompileChildren(j, spath, out));
  TRAINLET_RETURN_IF_ERROR(CompileValueConstraints(j, spath, out));
  CompileRules(j, out);
  return Status::Ok();
}

const char* TypeWithArticle(SchemaNode::Type type) {
  switch (type) {
    case SchemaNode::Type::kObject:
      return "an object";
    case SchemaNode::Type::kArray:
      return "an array";
    case SchemaNode::Type::kString:
      return "a string";
    case SchemaNode::Type::kInteger:
      return "an integer";
    case SchemaNode::Type::kNumber:
      return "a number";
    case SchemaNode::Type::kBoolean:
      return "a boolean";
    case SchemaNode::Type::kAny:
      break;
  }
  return "a value";
}

bool TypeMatches(SchemaNode::Type type, YamlKind kind) {
  switch (type) {
    case SchemaNode::Type::kAny:
      return true;
    case SchemaNode::Type::kObject:
      return kind == YamlKind::kObject;
    case SchemaNode::Type::kArray:
      return kind == YamlKind::kArray;
    case SchemaNode::Type::kString:
      return kind == YamlKind::kString;
    case SchemaNode::Type::kInteger:
      return kind == YamlKind::kInt;
    case SchemaNode::Type::kNumber:
      return kind == YamlKind::kInt || kind == YamlKind::kFloat;
    case SchemaNode::Type::kBoolean:
      return kind == YamlKind::kBool;
  }
  return false;
}

std::string FormatNumber(double v) {
  if (std::floor(v) == v && std::fabs(v) < 1e15) return std::to_string(static_cast<int64_t>(v));
  return std::to_string(v);
}

// Characters as Kubernetes counts them for min/maxLength: Unicode code points.
int64_t CountCodePoints(const std::string& s) {
  int64_t n = 0;
  for (unsigned char c : s) {
    if ((c & 0xC0) != 0x80) ++n;
  }
  return n;
}

bool Compare(double value, const std::string& op, double bound) {
  if (op == ">=") return value >= bound;
  if (op == ">") return value > bound;
  if (op == "<=") return value <= bound;
  if (op == "<") return value < bound;
  if (op == "==") return value == bound;
  return value != bound;
}

class Validator {
 public:
  Validator(SchemaFindings* findings, size_t max_errors)
      : findings_(findings), max_errors_(max_errors) {}

  void Check(const SchemaNode& s, const YAML::Node& v, const std::string& path,
             const std::vector<std::string>* skip_keys = nullptr) {
    if (Full()) return;
    YamlKind kind = Classify(v);
    if (kind == YamlKind::kNull) {
      if (!s.nullable && s.type != SchemaNode::Type::kAny) {
        Error(path, std::string("must be ") + TypeWithArticle(s.type) + ", got null");
      }
      return;
    }
    if (s.int_or_string) {
      if (kind != YamlKind::kInt && kind != YamlKind::kString) {
        Error(path, "must be an integer or a string, got " + DescribeValue(v));
        return;
      }
    } else if (!TypeMatches(s.type, kind)) {
      Error(path, std::string("must be ") + TypeWithArticle(s.type) + ", got " + DescribeValue(v));
      return;
    }
    if (!s.any_of.empty() && !s.int_or_string) CheckAnyOf(s, v, path);
    if (s.has_enum && v.IsScalar()) CheckEnum(s, v, path);
    switch (kind) {
      case YamlKind::kInt:
      case YamlKind::kFloat:
        CheckNumber(s, v, kind, path);
        break;
      case YamlKind::kString:
        CheckString(s, v.Scalar(), path);
        break;
      case YamlKind::kObject:
        CheckObject(s, v, path, skip_keys);
        break;
      case YamlKind::kArray:
        CheckArray(s, v, path);
        break;
      case YamlKind::kBool:
      case YamlKind::kNull:
        break;
    }
  }

 private:
  bool Full() const { return findings_->errors.size() >= max_errors_; }

  void Error(const std::string& path, const std::string& what) {
    if (Full()) return;
    findings_->errors.push_back((path.empty() ? std::string("(root)") : path) + ": " + what);
  }
  void Warn(const std::string& path, const std::string& what) {
    findings_->warnings.push_back(path + ": " + what);
  }

  void CheckAnyOf(const SchemaNode& s, const YAML::Node& v, const std::string& path) {
    for (const auto& branch : s.any_of) {
      SchemaFindings scratch;
      Validator(&scratch, 1).Check(*branch, v, path);
      if (scratch.errors.empty()) return;
    }
    Error(path, "matches none of the allowed forms (anyOf), got " + DescribeValue(v));
  }

  void CheckEnum(const SchemaNode& s, const YAML::Node& v, const std::string& path) {
    for (const auto& allowed : s.enum_values) {
      if (allowed == v.Scalar()) return;
    }
    std::string list;
    for (const auto& allowed : s.enum_values) {
      if (!list.empty()) list += ", ";
      list += QuoteForMessage(allowed);
    }
    Error(path, "must be one of " + list + ", got " + DescribeValue(v));
  }

  void CheckNumber(const SchemaNode& s, const YAML::Node& v, YamlKind kind,
                   const std::string& path) {
    double value = 0;
    if (kind == YamlKind::kInt) {
      std::optional<int64_t> i = ParseInt64(v.Scalar());
      if (!i) {
        Error(path, "integer " + DescribeValue(v) + " does not fit in 64 bits");
        return;
      }
      if (s.format == SchemaNode::Format::kInt32 && (*i < INT32_MIN || *i > INT32_MAX)) {
        Error(path, "must fit in a 32-bit integer, got " + DescribeValue(v));
        return;
      }
      value = static_cast<double>(*i);
    } else {
      value = std::strtod(v.Scalar().c_str(), nullptr);
    }
    if (s.minimum && (s.exclusive_minimum ? value <= *s.minimum : value < *s.minimum)) {
      Error(path, std::string("must be ") + (s.exclusive_minimum ? "> " : ">= ") +
                      FormatNumber(*s.minimum) + ", got " + DescribeValue(v));
    }
    if (s.maximum && (s.exclusive_maximum ? value >= *s.maximum : value > *s.maximum)) {
      Error(path, std::string("must be ") + (s.exclusive_maximum ? "< " : "<= ") +
                      FormatNumber(*s.maximum) + ", got " + DescribeValue(v));
    }
    for (const auto& rule : s.rules) {
      if (rule.kind == SchemaRule::Kind::kCompare && !Compare(value, rule.op, rule.bound)) {
        Error(path, rule.message + ", got " + DescribeValue(v));
      }
    }
  }

  void CheckString(const SchemaNode& s, const std::string& value, const std::string& path) {
    int64_t length = CountCodePoints(value);
    if (s.min_length && length < *s.min_length) {
      Error(path, "must be at least " + std::to_string(*s.min_length) + " characters long, got " +
                      QuoteForMessage(value));
    }
    if (s.max_length && length > *s.max_length) {
      Error(path, "must be at most " + std::to_string(*s.max_length) + " characters long, got " +
                      std::to_string(length));
    }
    if (s.pattern && !Matches(*s.pattern, value)) {
      Error(path, "must match " + s.pattern_text + ", got " + QuoteForMessage(value));
    }
    for (const auto& rule : s.rules) {
      bool ok = true;
      if (rule.kind == SchemaRule::Kind::kIn) {
        ok = std::find(rule.values.begin(), rule.values.end(), value) != rule.values.end();
      } else if (rule.kind == SchemaRule::Kind::kMatches) {
        ok = (rule.allow_empty && value.empty()) || Matches(rule.re, value);
      }
      if (!ok) Error(path, rule.message + ", got " + QuoteForMessage(value));
    }
  }

  // OpenAPI patterns and CEL matches() are unanchored searches.
  static bool Matches(const std::regex& re, const std::string& value) {
    if (value.size() > kMaxPatternInput) return false;
    try {
      return std::regex_search(value, re);
    } catch (const std::regex_error&) {
      return false;  // too complex for std::regex: treated as not matching
    }
  }

  void CheckObject(const SchemaNode& s, const YAML::Node& v, const std::string& path,
                   const std::vector<std::string>* skip_keys) {
    std::set<std::string, std::less<>> seen;
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (Full()) return;
      if (!it->first.IsScalar()) {
        Error(path, "has a key that is not a string");
        continue;
      }
      const std::string& key = it->first.Scalar();
      std::string child = AppendKey(path, key);
      if (!seen.insert(key).second) {
        Error(child, "duplicate key");
        continue;
      }
      if (skip_keys && std::find(skip_keys->begin(), skip_keys->end(), key) != skip_keys->end()) {
        continue;
      }
      auto prop = s.properties.find(key);
      if (prop != s.properties.end()) {
        // A null field is pruned by the API server, so it is as good as absent.
        if (Classify(it->second) == YamlKind::kNull && !prop->second->nullable) continue;
        Check(*prop->second, it->second, child);
      } else if (s.additional) {
        Check(*s.additional, it->second, child);
      } else if (!s.additional_any && !s.preserve_unknown) {
        Warn(child, "unknown field, ignored");
      }
    }
    for (const auto& name : s.required) {
      if (skip_keys && std::find(skip_keys->begin(), skip_keys->end(), name) != skip_keys->end()) {
        continue;
      }
      if (!IsSet(MapGet(v, name))) Error(AppendKey(path, name), "required field missing");
    }
    int64_t count = static_cast<int64_t>(v.size());
    if (s.min_properties && count < *s.min_properties) {
      Error(path, "must have at least " + std::to_string(*s.min_properties) + " fields");
    }
    if (s.max_properties && count > *s.max_properties) {
      Error(path, "must have at most " + std::to_string(*s.max_properties) + " fields");
    }
  }

  void CheckArray(const SchemaNode& s, const YAML::Node& v, const std::string& path) {
    int64_t count = static_cast<int64_t>(v.size());
    if (s.min_items && count < *s.min_items) {
      Error(path, "must have at least " + std::to_string(*s.min_items) + " items, got " +
                      std::to_string(count));
    }
    if (s.max_items && count > *s.max_items) {
      Error(path, "must have at most " + std::to_string(*s.max_items) + " items, got " +
                      std::to_string(count));
    }
    if (!s.items) return;
    size_t i = 0;
    for (auto it = v.begin(); it != v.end(); ++it, ++i) {
      if (Full()) return;
      Check(*s.items, *it, AppendIndex(path, i));
    }
  }

  SchemaFindings* findings_;
  size_t max_errors_;
};

std::unique_ptr<CrdSchema> CompileEmbedded(std::string_view kind) {
  std::string json = EmbeddedCrdSchemaJson(kind);
  TRAINLET_CHECK_MSG(!json.empty(), "no embedded CRD schema for " + std::string(kind));
  auto schema = CrdSchema::Compile(json);
  TRAINLET_CHECK_MSG(schema.ok(), schema.status().ToString());
  return std::move(schema).value();
}

}  // namespace

CrdSchema::CrdSchema(std::unique_ptr<SchemaNode> root) : root_(std::move(root)) {}
CrdSchema::~CrdSchema() = default;

Result<std::unique_ptr<CrdSchema>> CrdSchema::Compile(std::string_view json) {
  Json j = Json::parse(json.begin(), json.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InternalError("CRD schema: not valid JSON");
  auto root = std::make_unique<SchemaNode>();
  TRAINLET_RETURN_IF_ERROR(CompileNode(j, "", root.get()));
  return std::unique_ptr<CrdSchema>(new CrdSchema(std::move(root)));
}

const CrdSchema* CrdSchema::ForKind(std::string_view kind) {
  // One compiled schema per kind, each compiled on first use only, and thread-safely (a
  // block-scope static per kind).
  static constexpr std::string_view kKinds[] = {
      "TrainJob",   "TrainingRuntime", "ClusterTrainingRuntime",
      "PyTorchJob", "TFJob",           "XGBoostJob",
      "PaddleJob",  "JAXJob",          "MPIJob"};
  static std::unique_ptr<CrdSchema> compiled[std::size(kKinds)];
  static std::once_flag once[std::size(kKinds)];
  for (size_t i = 0; i < std::size(kKinds); ++i) {
    if (kind != kKinds[i]) continue;
    std::call_once(once[i], [i] { compiled[i] = CompileEmbedded(kKinds[i]); });
    return compiled[i].get();
  }
  return nullptr;
}

SchemaFindings CrdSchema::Validate(const YAML::Node& doc,
                                   const std::vector<std::string>& skip_top_level,
                                   size_t max_errors) const {
  SchemaFindings findings;
  Validator(&findings, max_errors).Check(*root_, doc, "", &skip_top_level);
  return findings;
}

}  // namespace trainlet::trainjob
