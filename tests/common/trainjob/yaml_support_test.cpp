#include "common/trainjob/yaml_support.h"

#include <gtest/gtest.h>

namespace trainlet::trainjob {
namespace {

YamlKind KindOf(const std::string& text) { return Classify(YAML::Load(text)["v"]); }

TEST(YamlSupportTest, ClassifiesByCoreSchemaAndQuoting) {
  EXPECT_EQ(KindOf("v: 3"), YamlKind::kInt);
  EXPECT_EQ(KindOf("v: -3"), YamlKind::kInt);
  EXPECT_EQ(KindOf("v: \"3\""), YamlKind::kString);
  EXPECT_EQ(KindOf("v: '3'"), YamlKind::kString);
  EXPECT_EQ(KindOf("v: !!str 3"), YamlKind::kString);
  EXPECT_EQ(KindOf("v: 3.5"), YamlKind::kFloat);
  EXPECT_EQ(KindOf("v: 1e3"), YamlKind::kFloat);
  EXPECT_EQ(KindOf("v: .inf"), YamlKind::kFloat);
  EXPECT_EQ(KindOf("v: true"), YamlKind::kBool);
  EXPECT_EQ(KindOf("v: False"), YamlKind::kBool);
  EXPECT_EQ(KindOf("v: yes"), YamlKind::kString);  // YAML 1.2: not a boolean
  EXPECT_EQ(KindOf("v: ~"), YamlKind::kNull);
  EXPECT_EQ(KindOf("v:"), YamlKind::kNull);
  EXPECT_EQ(KindOf("v: three"), YamlKind::kString);
  EXPECT_EQ(KindOf("v: 2Gi"), YamlKind::kString);
  EXPECT_EQ(KindOf("v: {a: 1}"), YamlKind::kObject);
  EXPECT_EQ(KindOf("v: [1]"), YamlKind::kArray);
}

TEST(YamlSupportTest, ParseInt64RejectsOverflowAndJunk) {
  EXPECT_EQ(ParseInt64("42"), 42);
  EXPECT_EQ(ParseInt64("+7"), 7);
  EXPECT_EQ(ParseInt64("-9223372036854775808"), INT64_MIN);
  EXPECT_FALSE(ParseInt64("9223372036854775808"));
  EXPECT_FALSE(ParseInt64("4x"));
  EXPECT_FALSE(ParseInt64(""));
}

TEST(YamlSupportTest, PathsBracketKeysThatAreNotIdentifiers) {
  EXPECT_EQ(AppendKey("", "spec"), "spec");
  EXPECT_EQ(AppendKey("spec", "trainer"), "spec.trainer");
  EXPECT_EQ(AppendKey("requests", "nvidia.com/gpu"), "requests[nvidia.com/gpu]");
  EXPECT_EQ(AppendIndex("env", 0), "env[0]");
}

TEST(YamlSupportTest, LoadNumbersDocumentsAndKeepsEmptyOnes) {
  auto docs = LoadDocuments("# only a comment\n---\na: 1\n---\n---\nb: 2\n");
  ASSERT_TRUE(docs.ok()) << docs.status().ToString();
  int non_empty = 0;
  for (const auto& d : *docs) non_empty += IsSet(d.node) ? 1 : 0;
  EXPECT_EQ(non_empty, 2);
  EXPECT_EQ(docs->back().index, static_cast<int>(docs->size()));
}

TEST(YamlSupportTest, SyntaxErrorNamesDocumentLineAndColumn) {
  auto docs = LoadDocuments("a: 1\n---\nb: [1, 2\nc: 3\n");
  ASSERT_FALSE(docs.ok());
  const std::string& m = docs.status().message();
  EXPECT_NE(m.find("document 2: line "), std::string::npos) << m;
  EXPECT_NE(m.find("column"), std::string::npos) << m;
  EXPECT_NE(m.find("YAML syntax error"), std::string::npos) << m;
}

TEST(YamlSupportTest, LoneCommaIsAnErrorNotAHang) {
  // yaml-cpp 0.7's LoadAll loops forever on these (jbeder/yaml-cpp#1040).
  for (const char* text : {",", "a: 1\n---\n,\n", "- !+(.,.)"}) {
    auto docs = LoadDocuments(text);
    ASSERT_FALSE(docs.ok()) << text;
    EXPECT_NE(docs.status().message().find("YAML syntax error"), std::string::npos)
        << docs.status().message();
  }
  auto second = LoadDocuments("a: 1\n---\n,\n");
  EXPECT_NE(second.status().message().find("document 2"), std::string::npos)
      << second.status().message();
}

TEST(YamlSupportTest, RefusesTooManyDocuments) {
  std::string many;
  for (int i = 0; i <= kMaxYamlDocuments; ++i) many += "---\na: 1\n";
  auto docs = LoadDocuments(many);
  ASSERT_FALSE(docs.ok());
  EXPECT_NE(docs.status().message().find("documents"), std::string::npos);
}

TEST(YamlSupportTest, RefusesOversizedInput) {
  std::string big(kMaxYamlBytes + 1, ' ');
  auto docs = LoadDocuments(big);
  ASSERT_FALSE(docs.ok());
  EXPECT_NE(docs.status().message().find("over the limit"), std::string::npos);
}

TEST(YamlSupportTest, RefusesDeepNestingBeforeRecursing) {
  // Far deeper than any stack would survive if the parser recursed all the way.
  std::string deep(100000, '[');
  auto docs = LoadDocuments(deep);
  ASSERT_FALSE(docs.ok());
  EXPECT_NE(docs.status().message().find("nested deeper than 64"), std::string::npos)
      << docs.status().message();

  std::string ok;
  for (int i = 0; i < 60; ++i) ok += "[";
  for (int i = 0; i < 60; ++i) ok += "]";
  EXPECT_TRUE(LoadDocuments(ok).ok());
}

TEST(YamlSupportTest, RefusesBillionLaughs) {
  std::string bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n";
  std::string prev = "a";
  for (char c = 'b'; c <= 'j'; ++c) {
    std::string cur(1, c);
    bomb += cur + ": &" + cur + " [";
    for (int i = 0; i < 10; ++i) bomb += (i ? ", *" : "*") + prev;
    bomb += "]\n";
    prev = cur;
  }
  auto docs = LoadDocuments(bomb);
  ASSERT_FALSE(docs.ok());
  EXPECT_NE(docs.status().message().find("aliases expand"), std::string::npos)
      << docs.status().message();
  // A modest alias is fine.
  EXPECT_TRUE(LoadDocuments("a: &x {k: v}\nb: *x\n").ok());
}

TEST(YamlSupportTest, RefusesInvalidUtf8WithPosition) {
  auto docs = LoadDocuments("a: 1\nb: x\xff\n");
  ASSERT_FALSE(docs.ok());
  EXPECT_EQ(docs.status().message(),
            "line 2, column 5: not printable UTF-8 (control characters other than tab and line "
            "breaks are not allowed)");
  // yaml-cpp reads a NUL followed by text as garbage bytes.
  EXPECT_FALSE(LoadDocuments(std::string("a: x\0Ny\n", 9)).ok());
  EXPECT_FALSE(LoadDocuments("a: \x0e\n").ok());
  EXPECT_TRUE(LoadDocuments("a: 'b\tc'\r\n").ok());
  EXPECT_FALSE(LoadDocuments("a: \xc0\x80\n").ok());      // overlong NUL
  EXPECT_FALSE(LoadDocuments("a: \xed\xa0\x80\n").ok());  // a surrogate
  EXPECT_TRUE(LoadDocuments("a: gr\xc3\xbc\xc3\x9f \xf0\x9f\x9a\x80\n").ok());
}

TEST(YamlSupportTest, EmitsLongAndMultiLineKeysExplicitly) {
  YAML::Node in = YAML::Load("? " + std::string(2000, 'k') + "\n: 1\n\"a\\nb\": 2\n");
  std::string emitted = EmitYaml(in);
  YAML::Node out = YAML::Load(emitted);
  EXPECT_EQ(out[std::string(2000, 'k')].Scalar(), "1") << emitted;
  EXPECT_EQ(out["a\nb"].Scalar(), "2") << emitted;
}

TEST(YamlSupportTest, EmitKeepsTypes) {
  const std::string text =
      "s: \"3\"\nb: \"true\"\ne: \"\"\nn: \"null\"\ni: 3\nt: true\nz: ~\n"
      "script: |\n  line one\n  line two\n"
      "noeol: \"a\\nb\"\nlead: \"  x\\n\"\n\"7\": key\nempty_map: {}\nempty_list: []\n";
  YAML::Node in = YAML::Load(text);
  std::string emitted = EmitYaml(in);
  YAML::Node out = YAML::Load(emitted);
  for (auto it = in.begin(); it != in.end(); ++it) {
    std::string key = it->first.Scalar();
    YAML::Node o = out[key];
    ASSERT_TRUE(o.IsDefined()) << key << "\n" << emitted;
    EXPECT_EQ(Classify(o), Classify(it->second)) << key << "\n" << emitted;
    if (it->second.IsScalar()) EXPECT_EQ(o.Scalar(), it->second.Scalar()) << key;
  }
  EXPECT_NE(emitted.find("script: |"), std::string::npos) << emitted;
}

}  // namespace
}  // namespace trainlet::trainjob
