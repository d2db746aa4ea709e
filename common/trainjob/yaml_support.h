// YAML plumbing shared by the CRD schema validator and the TrainJob model: loading a multi-document
// file safely, deciding what JSON type a YAML node stands for, and writing it back out.
//
// Everything here turns yaml-cpp exceptions into Status values; no function throws.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace trainlet::trainjob {

// Caps that keep a hostile file (a YAML bomb, a deeply nested flow sequence) from exhausting the
// stack or memory of a daemon that parses operator input.
inline constexpr size_t kMaxYamlBytes = 4u << 20;
inline constexpr int kMaxYamlDepth = 64;
// Nodes one document may expand to once aliases are followed.
inline constexpr int64_t kMaxYamlNodes = 1'000'000;
inline constexpr int kMaxYamlDocuments = 10'000;

// The JSON type a YAML node stands for, as the Kubernetes API server sees it after converting
// YAML to JSON. Plain scalars resolve by the YAML 1.2 core schema (true/false, decimal integers,
// floats, null/~); quoted scalars and `!!str` are always strings.
enum class YamlKind { kNull, kBool, kInt, kFloat, kString, kObject, kArray };

YamlKind Classify(const YAML::Node& node);
// "null", "boolean", "integer", "number", "string", "object", "array".
const char* YamlKindName(YamlKind kind);

// A value as error messages show it: strings quoted ("three"), numbers and booleans bare,
// objects and arrays by kind only. Long strings are cut.
std::string DescribeValue(const YAML::Node& node);
// `s` in double quotes with control characters escaped, cut to about 80 characters.
std::string QuoteForMessage(std::string_view s);

// A decimal integer ("-12", "+3"); nullopt when `s` is not one or overflows int64.
std::optional<int64_t> ParseInt64(std::string_view s);

// "", "~", "null", "Null" or "NULL": the texts a plain scalar reads as null (the YAML 1.2 core
// schema, and yaml-cpp's own rule for an untagged plain scalar).
bool IsNullText(std::string_view s);

// The value of `key` in map `node`, or an undefined node (operator! is true) when absent or when
// `node` is not a map. Unlike yaml-cpp's operator[], never inserts and never throws.
YAML::Node MapGet(const YAML::Node& node, std::string_view key);
// True when `node` is present and not null: what "the field is set" means for Kubernetes, which
// prunes null fields before validation.
bool IsSet(const YAML::Node& node);
// Readers for values the schema has already checked: a wrong type there is impossible, but an
// absent or null field is not, and reads as empty. ScalarText: a scalar's text, else "".
// ScalarList: the ScalarText of each item of a sequence, else no items.
std::string ScalarText(const YAML::Node& node);
std::vector<std::string> ScalarList(const YAML::Node& node);

// Joins a field path: AppendKey("spec", "trainer") == "spec.trainer"; keys that are not plain
// identifiers go in brackets: "requests[nvidia.com/gpu]". AppendIndex("env", 0) == "env[0]".
std::string AppendKey(const std::string& path, std::string_view key);
std::string AppendIndex(const std::string& path, size_t index);

// One `---`-separated document of a file. `node` is null for an empty or comment-only document;
// `index` counts from 1 over every document, empty ones included, so messages match the file.
struct YamlDocument {
  int index = 0;
  YAML::Node node;
};

// Loads every document of `text`. Fails on input over kMaxYamlBytes, on a syntax error
// ("document 2: line 4, column 3: YAML syntax error: ..."; lines count from the top of the file),
// on text that is not UTF-8, on nesting deeper than kMaxYamlDepth, on more than
// kMaxYamlDocuments documents and on alias expansion past kMaxYamlNodes.
Result<std::vector<YamlDocument>> LoadDocuments(std::string_view text);

// Writes `node` as block YAML that loads back to the same JSON value: strings that would read as
// another type when plain ("3", "true", "") are quoted, multi-line strings use literal style.
// The text is yaml-cpp's Emitter's (indent 2), byte for byte: re-applying an unchanged object is
// recognised by comparing it with the stored text. Written directly for trees of plain ASCII
// scalars; through yaml-cpp (EmitYamlWithYamlCpp) for the rest.
std::string EmitYaml(const YAML::Node& node);
std::string EmitYamlWithYamlCpp(const YAML::Node& node);

}  // namespace trainlet::trainjob
