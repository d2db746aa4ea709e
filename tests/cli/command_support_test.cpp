#include "trainletctl/command_support.h"

#include <gtest/gtest.h>

#include <string>

namespace trainlet::cli {
namespace {

TEST(TrainJobNamed, TakesKubectlsSpellings) {
  for (const auto& [kind, name] : {std::pair{"trainjob", "llm"},
                                   {"trainjobs", "llm"},
                                   {"tj", "llm"},
                                   {"TrainJob", "llm"},
                                   {"trainjob.trainer.kubeflow.org", "llm"},
                                   {"trainjob/llm", ""},
                                   {"tj/llm", ""}}) {
    const auto got = TrainJobNamed("suspend", kind, name, false);
    ASSERT_TRUE(got.ok()) << kind << " " << name << ": " << got.status().message();
    EXPECT_EQ(*got, "llm") << kind << " " << name;
  }
}

TEST(TrainJobNamed, RefusalsNameTheVerbAndWhatWasGiven) {
  const auto node = TrainJobNamed("admit-check", "node", "node-1", false);
  ASSERT_FALSE(node.ok());
  EXPECT_EQ(node.status().message(), "admit-check: expected trainjob NAME, got \"node node-1\"");
  const auto bare = TrainJobNamed("resume", "trainjob", "", false);
  ASSERT_FALSE(bare.ok());
  EXPECT_EQ(bare.status().message(), "resume: expected trainjob NAME, got \"trainjob\"");
  const auto all = TrainJobNamed("suspend", "trainjob/llm", "", true);
  ASSERT_FALSE(all.ok());
  EXPECT_NE(all.status().message().find("suspend: a trainjob cannot be named across all "
                                        "namespaces (-A)"),
            std::string::npos)
      << all.status().message();
}

}  // namespace
}  // namespace trainlet::cli
