// YAML text to yaml-cpp nodes through libyaml's event parser, in one pass with the caps of
// yaml_support.h checked as the events come (LoadDocuments is the entry point; this is its parser).
//
// Why not yaml-cpp's own LoadAll: its scanner is the slow part of applying a file (about 5 times
// libyaml's, bench/README.md), and it cannot be stopped from inside: LoadAll loops forever on some
// malformed input (jbeder/yaml-cpp#1040) and recurses once per level of nesting, so it needed a
// first pass of its own parser just to find both. libyaml's parser keeps its stacks on the heap
// and ends on every input, and its events are checked here (depth, document count) before the
// node they open is built.
//
// The nodes are what yaml-cpp's LoadAll makes of the same text, which the rest of the code reads:
// plain untagged scalars tagged "?", quoted ones "!", explicit tags in their long form
// ("tag:yaml.org,2002:str"); a plain "", "~", "null", "Null" or "NULL" is a null node; an alias
// is the anchored node itself (so an alias of a collection being built makes a cycle, which
// LoadDocuments' expansion check refuses); duplicate keys are all kept, the first one read.
// Only the nodes' marks (source positions) are not set: nothing reads them.
#pragma once

#include <yaml-cpp/yaml.h>

#include <string_view>
#include <vector>

#include "common/status.h"

namespace trainlet::trainjob {

struct YamlStream {
  std::vector<YAML::Node> documents;  // a null node for an empty document
  bool has_alias = false;             // then LoadDocuments checks what aliases expand to
};

// Every document of `text` (UTF-8). Errors name the document, line and column:
// "document 2: line 4, column 3: YAML syntax error: did not find expected ',' or ']' (in a flow
// sequence started at line 3, column 4)"; also "nested deeper than 64 levels" and
// "more than 10000 documents" (yaml_support.h's kMaxYamlDepth and kMaxYamlDocuments).
Result<YamlStream> ParseYamlStream(std::string_view text);

}  // namespace trainlet::trainjob
