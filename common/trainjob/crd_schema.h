// A validator for the OpenAPI v3 structural schemas of Kubernetes CustomResourceDefinitions, as
// much of them as trainlet needs to refuse what the Kubernetes API server would refuse.
//
// Checked: type (object/array/string/integer/number/boolean), properties, required, items,
// additionalProperties (schema or bool), enum, minimum/maximum (and exclusive*), minLength/
// maxLength, minItems/maxItems, minProperties/maxProperties, pattern (ECMAScript regex), format
// int32/int64 ranges, anyOf, nullable, x-kubernetes-int-or-string,
// x-kubernetes-preserve-unknown-fields, and the simple x-kubernetes-validations rules
// `self <op> N`, `self in ['a', ...]`, `self.matches('re')`, `self == '' || self.matches('re')`.
// Other CEL rules are skipped; `default` is not applied.
//
// Unlike the API server, a field that the schema does not know is not silently pruned: it is
// reported as a warning ("...: unknown field, ignored"), because an operator who misspells a
// field deserves to hear about it. A null field is treated as absent, as the API server prunes it.
#pragma once

#include <yaml-cpp/yaml.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace trainlet::trainjob {

struct SchemaNode;  // defined in crd_schema.cpp

// What validation found. Each entry is "<path>: <what>", the path written like
// spec.trainer.env[0].name (map keys that are not identifiers in brackets:
// requests[nvidia.com/gpu]).
struct SchemaFindings {
  std::vector<std::string> errors;
  std::vector<std::string> warnings;
};

// One CRD's openAPIV3Schema, compiled. Immutable after Compile; Validate may be called
// concurrently from any thread.
class CrdSchema {
 public:
  ~CrdSchema();
  CrdSchema(const CrdSchema&) = delete;
  CrdSchema& operator=(const CrdSchema&) = delete;

  // Compiles a schema written as JSON. Fails, naming the schema path, on JSON that is not an
  // object, a keyword of the wrong type, or a `pattern` that std::regex cannot compile.
  static Result<std::unique_ptr<CrdSchema>> Compile(std::string_view json);

  // The schema embedded in the binary for `kind` ("TrainJob", "TrainingRuntime",
  // "ClusterTrainingRuntime", and the v1 job kinds of EmbeddedCrdSchemaJson), compiled once on
  // first use; nullptr for any other kind. Thread-safe. An embedded schema that fails to compile is
  // a build bug and aborts.
  static const CrdSchema* ForKind(std::string_view kind);

  // Checks `doc` (the whole object, apiVersion and kind included). Top-level keys named in
  // `skip_top_level` are not looked at: the caller checks them itself (metadata, whose schema in a
  // CRD is only `type: object`). At most `max_errors` errors are collected.
  SchemaFindings Validate(const YAML::Node& doc,
                          const std::vector<std::string>& skip_top_level = {},
                          size_t max_errors = 20) const;

 private:
  explicit CrdSchema(std::unique_ptr<SchemaNode> root);
  std::unique_ptr<SchemaNode> root_;
};

}  // namespace trainlet::trainjob
