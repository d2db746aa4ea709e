#include "common/trainjob/crd_schema.h"

#include <gtest/gtest.h>

namespace trainlet::trainjob {
namespace {

constexpr const char* kSchema = R"json({
  "type": "object",
  "properties": {
    "count": {"type": "integer", "format": "int32", "minimum": 0, "maximum": 10},
    "procs": {"type": "integer", "x-kubernetes-validations": [
        {"rule": "self >= 1", "message": "procs must be >= 1"},
        {"rule": "self == oldSelf", "message": "immutable"}]},
    "ratio": {"type": "number"},
    "flag": {"type": "boolean"},
    "name": {"type": "string", "minLength": 1, "maxLength": 5},
    "mode": {"type": "string", "enum": ["A", "B", ""]},
    "uri": {"type": "string", "x-kubernetes-validations": [
        {"rule": "self == '' || self.matches('^[a-z]+://.+$')", "message": "bad uri"}]},
    "owner": {"type": "string", "x-kubernetes-validations": [
        {"rule": "self in ['me', 'you']", "message": "unknown owner"}]},
    "qty": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}],
            "pattern": "^[0-9]+(Gi|Mi)?$"},
    "tags": {"type": "array", "minItems": 1, "maxItems": 2, "items": {"type": "string"}},
    "env": {"type": "array", "items": {"type": "object", "required": ["name"],
            "properties": {"name": {"type": "string"}, "value": {"type": "string"}}}},
    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
    "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
    "any": {"type": "object", "additionalProperties": true},
    "maybe": {"type": "string", "nullable": true},
    "meta": {"type": "object"}
  },
  "required": ["count"]
})json";

class CrdSchemaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto compiled = CrdSchema::Compile(kSchema);
    ASSERT_TRUE(compiled.ok()) << compiled.status().ToString();
    schema_ = std::move(compiled).value();
  }

  SchemaFindings Check(const std::string& yaml) { return schema_->Validate(YAML::Load(yaml)); }

  // The single error for `yaml`, or a failure.
  std::string OnlyError(const std::string& yaml) {
    SchemaFindings f = Check(yaml);
    EXPECT_EQ(f.errors.size(), 1u) << yaml;
    return f.errors.empty() ? "" : f.errors[0];
  }

  std::unique_ptr<CrdSchema> schema_;
};

TEST_F(CrdSchemaTest, AcceptsValidDocument) {
  SchemaFindings f = Check(R"(
count: 3
procs: 2
ratio: 0.5
flag: false
name: abc
mode: ""
uri: hf://bucket/x
owner: me
qty: 4Gi
tags: [a]
env: [{name: A, value: "1"}]
labels: {x.io/y: z}
free: {anything: [1, 2]}
any: {k: 1}
maybe: ~
)");
  EXPECT_TRUE(f.errors.empty()) << f.errors[0];
  EXPECT_TRUE(f.warnings.empty());
}

TEST_F(CrdSchemaTest, TypeErrorsNameThePathAndValue) {
  EXPECT_EQ(OnlyError("count: three"), "count: must be an integer, got \"three\"");
  EXPECT_EQ(OnlyError("count: \"3\""), "count: must be an integer, got \"3\"");
  EXPECT_EQ(OnlyError("count: 1.5"), "count: must be an integer, got 1.5");
  EXPECT_EQ(OnlyError("count: 1\nflag: 1"), "flag: must be a boolean, got 1");
  EXPECT_EQ(OnlyError("count: 1\nname: 5"), "name: must be a string, got 5");
  EXPECT_EQ(OnlyError("count: 1\ntags: x"), "tags: must be an array, got \"x\"");
  EXPECT_EQ(OnlyError("count: 1\nlabels: [1]"), "labels: must be an object, got an array");
  EXPECT_EQ(OnlyError("count: 1\nratio: x"), "ratio: must be a number, got \"x\"");
  EXPECT_TRUE(Check("count: 1\nratio: 2").errors.empty());
}

TEST_F(CrdSchemaTest, RequiredAndNull) {
  EXPECT_EQ(OnlyError("name: a"), "count: required field missing");
  // A null field is pruned, so it is missing, not mistyped.
  EXPECT_EQ(OnlyError("count: ~"), "count: required field missing");
  EXPECT_EQ(OnlyError("count: 1\nenv: [{value: x}]"), "env[0].name: required field missing");
  EXPECT_EQ(OnlyError("count: 1\nenv: [{name: a}, {value: x}]"),
            "env[1].name: required field missing");
}

TEST_F(CrdSchemaTest, Bounds) {
  EXPECT_EQ(OnlyError("count: -1"), "count: must be >= 0, got -1");
  EXPECT_EQ(OnlyError("count: 11"), "count: must be <= 10, got 11");
  EXPECT_EQ(OnlyError("count: 4294967296"), "count: must fit in a 32-bit integer, got 4294967296");
  EXPECT_EQ(OnlyError("count: 1\nname: \"\""),
            "name: must be at least 1 characters long, got \"\"");
  EXPECT_EQ(OnlyError("count: 1\nname: abcdef"), "name: must be at most 5 characters long, got 6");
  EXPECT_EQ(OnlyError("count: 1\ntags: []"), "tags: must have at least 1 items, got 0");
  EXPECT_EQ(OnlyError("count: 1\ntags: [a, b, c]"), "tags: must have at most 2 items, got 3");
}

TEST_F(CrdSchemaTest, EnumPatternAndIntOrString) {
  EXPECT_EQ(OnlyError("count: 1\nmode: C"), "mode: must be one of \"A\", \"B\", \"\", got \"C\"");
  EXPECT_TRUE(Check("count: 1\nqty: 8").errors.empty());
  EXPECT_NE(OnlyError("count: 1\nqty: lots").find("qty: must match ^[0-9]+(Gi|Mi)?$"),
            std::string::npos);
  EXPECT_EQ(OnlyError("count: 1\nqty: 1.5"), "qty: must be an integer or a string, got 1.5");
  EXPECT_EQ(OnlyError("count: 1\nlabels: {a: 1}"), "labels.a: must be a string, got 1");
  EXPECT_EQ(OnlyError("count: 1\nlabels: {x.io/y: 1}"), "labels[x.io/y]: must be a string, got 1");
}

TEST_F(CrdSchemaTest, SimpleCelRules) {
  EXPECT_EQ(OnlyError("count: 1\nprocs: 0"), "procs: procs must be >= 1, got 0");
  EXPECT_EQ(OnlyError("count: 1\nuri: nope"), "uri: bad uri, got \"nope\"");
  EXPECT_TRUE(Check("count: 1\nuri: \"\"").errors.empty());
  EXPECT_EQ(OnlyError("count: 1\nowner: them"), "owner: unknown owner, got \"them\"");
}

TEST_F(CrdSchemaTest, UnknownFieldsWarnUnlessPreserved) {
  SchemaFindings f = Check("count: 1\nextra: 1\nmeta: {x: 1}\nfree: {y: 2}\nany: {z: 3}");
  EXPECT_TRUE(f.errors.empty());
  ASSERT_EQ(f.warnings.size(), 2u);
  EXPECT_EQ(f.warnings[0], "extra: unknown field, ignored");
  EXPECT_EQ(f.warnings[1], "meta.x: unknown field, ignored");
}

TEST_F(CrdSchemaTest, DuplicateKeysAndSkippedTopLevel) {
  EXPECT_EQ(OnlyError("count: 1\ncount: 2"), "count: duplicate key");
  SchemaFindings f = schema_->Validate(YAML::Load("meta: 5\nextra: 1"), {"meta", "count", "extra"});
  EXPECT_TRUE(f.errors.empty()) << f.errors[0];
  EXPECT_TRUE(f.warnings.empty());
}

TEST_F(CrdSchemaTest, CapsErrorCount) {
  std::string yaml = "count: x\nenv: [";
  for (int i = 0; i < 50; ++i) yaml += "{value: v},";
  yaml += "]";
  EXPECT_EQ(schema_->Validate(YAML::Load(yaml), {}, 5).errors.size(), 5u);
}

TEST(CrdSchemaCompileTest, RefusesBrokenSchemas) {
  EXPECT_FALSE(CrdSchema::Compile("not json").ok());
  EXPECT_FALSE(CrdSchema::Compile(R"({"type": "wat"})").ok());
  auto bad_pattern = CrdSchema::Compile(R"({"properties": {"a": {"pattern": "(("}}})");
  ASSERT_FALSE(bad_pattern.ok());
  EXPECT_NE(bad_pattern.status().message().find(".properties.a"), std::string::npos);
}

TEST(CrdSchemaEmbeddedTest, EveryKindCompiles) {
  for (const char* kind : {"TrainJob", "TrainingRuntime", "ClusterTrainingRuntime"}) {
    EXPECT_NE(CrdSchema::ForKind(kind), nullptr) << kind;
  }
  EXPECT_EQ(CrdSchema::ForKind("Pod"), nullptr);
}

}  // namespace
}  // namespace trainlet::trainjob
