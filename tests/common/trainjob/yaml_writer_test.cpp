// EmitYaml writes what yaml-cpp's Emitter writes, byte for byte (stored objects are compared as
// text on re-apply): for every YAML file of the repository and its subtrees, and thousands of
// random trees of the scalars that decide between plain, quoted and yaml-cpp's own path.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "common/trainjob/yaml_support.h"
#include "tests/common/trainjob/test_util.h"

namespace trainlet::trainjob {
namespace {

using testing::ReadFile;
using testing::RepositoryYamlFiles;

int CompareEverySubtree(const YAML::Node& node, const std::string& where, int depth = 0) {
  EXPECT_EQ(EmitYaml(node), EmitYamlWithYamlCpp(node)) << where;
  int n = 1;
  if (depth >= 3) return n;  // deeper subtrees are inside these (and yaml-cpp is slow)
  if (node.IsMap()) {
    for (const auto& kv : node) n += CompareEverySubtree(kv.second, where, depth + 1);
  } else if (node.IsSequence()) {
    for (const auto& item : node) n += CompareEverySubtree(item, where, depth + 1);
  }
  return n;
}

TEST(YamlWriterTest, EveryYamlFileOfTheRepositoryIsWrittenAsYamlCppWritesIt) {
  int nodes = 0;
  for (const auto& path : RepositoryYamlFiles()) {
    auto docs = LoadDocuments(ReadFile(path));
    if (!docs.ok()) continue;  // the files that test refusals
    for (const auto& doc : *docs) nodes += CompareEverySubtree(doc.node, path.string());
  }
  EXPECT_GE(nodes, 500) << "the repository's fixtures were not found";
}

// Scalars on both sides of every rule: plain or quoted by type, yaml-cpp's plain-scalar checks
// (indicators first, ": " and " #" inside, a trailing space), escapes, non-ASCII, line breaks.
const std::vector<std::string> kScalars = {"a",
                                           "name",
                                           "1",
                                           "-1",
                                           "+1",
                                           "1.5",
                                           ".5",
                                           "1e3",
                                           "0x1F",
                                           "true",
                                           "False",
                                           "null",
                                           "~",
                                           "",
                                           "-",
                                           "- a",
                                           "-a",
                                           "--x",
                                           "?",
                                           "? a",
                                           "?a",
                                           ":",
                                           ":a",
                                           "a:",
                                           "a: b",
                                           "a:b",
                                           "s3://b/k",
                                           "a #b",
                                           "a#b",
                                           "#a",
                                           " a",
                                           "a ",
                                           "a  b",
                                           "x y z",
                                           "@a",
                                           "a@b",
                                           "`a",
                                           "%a",
                                           "!a",
                                           "&a",
                                           "*a",
                                           "|",
                                           ">",
                                           "'a'",
                                           "\"a\"",
                                           "a\"b",
                                           "a\\b",
                                           "{a}",
                                           "[a]",
                                           ",a",
                                           "a,b",
                                           "(a)",
                                           "a=b",
                                           "=a",
                                           "~a",
                                           "a~",
                                           "100m",
                                           "nvidia.com/gpu",
                                           "/workspace",
                                           "./p",
                                           "_x",
                                           "é",
                                           "a\tb",
                                           "line\nbreak",
                                           "two\nlines\n",
                                           std::string(600, 'k'),
                                           "kueue.x-k8s.io/queue-name"};

YAML::Node RandomNode(std::mt19937& rng, int depth) {
  std::uniform_int_distribution<int> kind(0, depth >= 4 ? 2 : 5);
  std::uniform_int_distribution<size_t> pick(0, kScalars.size() - 1);
  std::uniform_int_distribution<int> size(0, 3);
  switch (kind(rng)) {
    case 0:
    case 1: {
      YAML::Node n(kScalars[pick(rng)]);
      n.SetTag(std::uniform_int_distribution<int>(0, 3)(rng) == 0 ? "!" : "?");
      return n;
    }
    case 2:
      return YAML::Node(YAML::NodeType::Null);
    case 3: {
      YAML::Node n(YAML::NodeType::Sequence);
      for (int i = size(rng); i > 0; --i) n.push_back(RandomNode(rng, depth + 1));
      return n;
    }
    default: {
      YAML::Node n(YAML::NodeType::Map);
      for (int i = size(rng); i > 0; --i) {
        n.force_insert(YAML::Node(kScalars[pick(rng)]), RandomNode(rng, depth + 1));
      }
      return n;
    }
  }
}

TEST(YamlWriterTest, RandomTreesAreWrittenAsYamlCppWritesThem) {
  std::mt19937 rng(20261126);
  for (int i = 0; i < 5000; ++i) {
    YAML::Node node = RandomNode(rng, 0);
    ASSERT_EQ(EmitYaml(node), EmitYamlWithYamlCpp(node)) << "tree " << i;
  }
}

TEST(YamlWriterTest, WhatItWritesLoadsBackToTheSameTree) {
  auto docs = LoadDocuments(
      "a: 1\nb: {c: [x, {d: ~, e: []}, [], [p, [q]]], f: {}}\n\"1\": \"true\"\nk: \"\"\n");
  ASSERT_TRUE(docs.ok());
  const std::string text = EmitYaml((*docs)[0].node);
  EXPECT_EQ(text,
            "a: 1\nb:\n  c:\n    - x\n    - d: ~\n      e:\n        []\n    -\n      []\n    -\n"
            "      - p\n      -\n        - q\n  f:\n    {}\n\"1\": \"true\"\nk: \"\"\n");
  auto back = LoadDocuments(text);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(EmitYaml((*back)[0].node), text);
}

}  // namespace
}  // namespace trainlet::trainjob
