// ParseYamlStream against yaml-cpp's own LoadAll: the same trees, node by node (type, tag, style,
// text, order, shared alias targets), for every YAML file the repository holds and for the
// corners of YAML a hostile or careless file reaches; and errors that name where.
#include "common/trainjob/yaml_event_loader.h"

#include <gtest/gtest.h>

#include <string>

#include "common/trainjob/yaml_support.h"
#include "tests/common/trainjob/test_util.h"

namespace trainlet::trainjob {
namespace {

using testing::ReadFile;
using testing::RepositoryYamlFiles;

// Everything about a node the code can read, in one string.
void Dump(const YAML::Node& n, std::string& out, int depth = 0) {
  if (depth > 70) {  // a cycle through an alias: both sides must have it at the same place
    out += "...";
    return;
  }
  out += "<" + std::to_string(static_cast<int>(n.Type())) + " tag=" + n.Tag();
  if (n.IsMap() || n.IsSequence()) out += " style=" + std::to_string(static_cast<int>(n.Style()));
  out += ">";
  if (n.IsScalar()) out += "'" + n.Scalar() + "'";
  if (n.IsSequence()) {
    out += "[";
    for (const auto& item : n) {
      Dump(item, out, depth + 1);
      out += ",";
    }
    out += "]";
  }
  if (n.IsMap()) {
    out += "{";
    for (const auto& kv : n) {
      Dump(kv.first, out, depth + 1);
      out += ":";
      Dump(kv.second, out, depth + 1);
      out += ",";
    }
    out += "}";
  }
}

std::string DumpAll(const std::vector<YAML::Node>& docs) {
  std::string out;
  for (const auto& d : docs) {
    Dump(d, out);
    out += "\n---\n";
  }
  return out;
}

void ExpectSameAsYamlCpp(const std::string& text, const std::string& what) {
  auto ours = ParseYamlStream(text);
  ASSERT_TRUE(ours.ok()) << what << ": " << ours.status().ToString();
  EXPECT_EQ(DumpAll(ours->documents), DumpAll(YAML::LoadAll(text))) << what;
}

TEST(YamlEventLoaderTest, EveryYamlFileOfTheRepositoryLoadsAsYamlCppLoadsIt) {
  int files = 0;
  for (const auto& path : RepositoryYamlFiles()) {
    const std::string text = ReadFile(path);
    YAML::LoadAll(text);  // files yaml-cpp refuses are for the error tests, not this one
    ExpectSameAsYamlCpp(text, path.string());
    ++files;
  }
  EXPECT_GE(files, 30) << "the repository's fixtures were not found";
}

TEST(YamlEventLoaderTest, TheCornersLoadAsYamlCppLoadsThem) {
  for (const char* text : {
           "",
           "# a comment only\n",
           "a: 1\n---\n---\nb: 2\n...\n",
           "a:\nb: ~\nc: null\nd: Null\ne: NULL\nf: 'null'\ng: \"\"\nh: !!null ~\n",
           "n: 3\nq: \"3\"\ns: '3'\nt: !!str 3\nu: !!int \"3\"\nv: !custom x\nw: ! x\n",
           "{\"apiVersion\":\"v1\",\"list\":[1,2.5,true,null,\"x\"],\"o\":{\"k\":{}}}",
           "base: &b {cpu: 2}\nuse: *b\nlist: &l [1, 2]\nagain: *l\nscalar: &s x\nkey: *s\n",
           "dup: 1\ndup: 2\n",
           "? [a, b]\n: complex key\n? {x: 1}\n: map key\n",
           "lit: |\n  one\n  two\nfold: >-\n  a\n  b\nkeep: |+\n  k\n\n",
           "s: \"tab\\there \\u00e9 \\x41\"\nt: 'it''s'\nu: a:b, c#d and ok\n",
           "- - - deep\n    - x\n- {a: [b, {c: d}]}\n- []\n- {}\n",
           "%YAML 1.1\n---\na: 1\n",
           "%TAG !e! tag:example.com,2000:\n---\na: !e!thing x\n",
           "k: [a:b, \"c\":d]\n",
           "!!map {a: 1}\n",
           "--- !!seq\n- 1\n",
       }) {
    ExpectSameAsYamlCpp(text, std::string("text: ") + text);
  }
}

TEST(YamlEventLoaderTest, AnAliasIsTheAnchoredNodeItself) {
  auto s = ParseYamlStream("a: &x {k: v}\nb: *x\n");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_TRUE(s->has_alias);
  EXPECT_TRUE(s->documents[0]["a"].is(s->documents[0]["b"]));
  auto none = ParseYamlStream("a: &x {k: v}\nb: x\n");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_alias);
}

TEST(YamlEventLoaderTest, ErrorsNameTheDocumentLineColumnAndWhatWasOpen) {
  auto s = ParseYamlStream("a: 1\n---\nb: [1, 2\nc: 3\n");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("document 2: line 4, column 2: YAML syntax error: "),
            std::string::npos)
      << s.status().message();
  EXPECT_NE(s.status().message().find("flow sequence that starts at line 3, column 4"),
            std::string::npos)
      << s.status().message();

  auto alias = ParseYamlStream("a: *nowhere\n");
  ASSERT_FALSE(alias.ok());
  EXPECT_EQ(alias.status().message(),
            "document 1: line 1, column 4: YAML syntax error: alias *nowhere names no anchor "
            "before it");

  // ": " inside a plain scalar: yaml-cpp reads one long string, YAML (and kubectl) refuse it.
  auto colon = ParseYamlStream("command: echo a: b\n");
  ASSERT_FALSE(colon.ok());
  EXPECT_EQ(colon.status().message(),
            "document 1: line 1, column 16: YAML syntax error: mapping values are not allowed in "
            "this context");

  // An anchor does not reach into the next document.
  EXPECT_FALSE(ParseYamlStream("a: &x 1\n---\nb: *x\n").ok());
}

TEST(YamlEventLoaderTest, NestingPastTheCapIsRefusedWhereItStarts) {
  std::string deep(kMaxYamlDepth, '[');
  EXPECT_TRUE(ParseYamlStream(deep + std::string(kMaxYamlDepth, ']')).ok());
  std::string deeper(kMaxYamlDepth + 1, '[');
  auto s = ParseYamlStream(deeper + std::string(kMaxYamlDepth + 1, ']'));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().message(), "document 1: line 1, column " +
                                      std::to_string(kMaxYamlDepth + 1) + ": nested deeper than " +
                                      std::to_string(kMaxYamlDepth) + " levels");
  // A million unclosed brackets: refused at the cap, without recursion or a hang.
  EXPECT_FALSE(ParseYamlStream(std::string(1'000'000, '[')).ok());
}

TEST(YamlEventLoaderTest, DocumentsPastTheCapAreRefused) {
  std::string many;
  for (int i = 0; i < kMaxYamlDocuments; ++i) many += "---\n";
  EXPECT_TRUE(ParseYamlStream(many).ok());
  auto s = ParseYamlStream(many + "---\n");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().message(), "more than " + std::to_string(kMaxYamlDocuments) + " documents");
}

}  // namespace
}  // namespace trainlet::trainjob
