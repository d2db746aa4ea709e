// JobKey and its inverse: bare names in namespace default, "<ns>.<name>" elsewhere.
#include "coordinator/job_key.h"

#include <gtest/gtest.h>

namespace trainlet::coordinator {
namespace {

TEST(JobKey, DefaultNamespaceKeepsTheBareName) {
  EXPECT_EQ(JobKey("default", "llm-7"), "llm-7");
  EXPECT_EQ(JobKey("", "llm-7"), "llm-7");
  EXPECT_EQ(JobKey("team-a", "llm-7"), "team-a.llm-7");
}

TEST(JobKey, InverseGivesNamespaceAndName) {
  for (const char* ns : {"default", "team-a", "x"}) {
    const JobRef ref = JobKeyRef(JobKey(ns, "llm-7"));
    EXPECT_EQ(ref.namespace_, ns);
    EXPECT_EQ(ref.name, "llm-7");
  }
  EXPECT_EQ(JobKeyRef("hello").namespace_, "default");
  EXPECT_EQ(JobKeyRef("").name, "");
}

TEST(JobKey, DisplayName) {
  EXPECT_EQ(JobDisplayName("llm-7"), "llm-7");
  EXPECT_EQ(JobDisplayName("team-a.llm-7"), "team-a/llm-7");
  EXPECT_EQ(NamespaceOrDefault(""), "default");
  EXPECT_EQ(NamespaceOrDefault("team-a"), "team-a");
}

}  // namespace
}  // namespace trainlet::coordinator
