#include "common/trainjob/object_names.h"

#include <gtest/gtest.h>

#include <string>

namespace trainlet::trainjob {
namespace {

TEST(ObjectNamesTest, Dns1123LabelIsLowercaseAlnumAndDashesWithAlnumEnds) {
  EXPECT_TRUE(IsDns1123Label("a"));
  EXPECT_TRUE(IsDns1123Label("team-a"));
  EXPECT_TRUE(IsDns1123Label("0team"));
  EXPECT_TRUE(IsDns1123Label(std::string(63, 'a')));
  EXPECT_FALSE(IsDns1123Label(""));
  EXPECT_FALSE(IsDns1123Label(std::string(64, 'a')));
  EXPECT_FALSE(IsDns1123Label("-team"));
  EXPECT_FALSE(IsDns1123Label("team-"));
  EXPECT_FALSE(IsDns1123Label("Team"));
  EXPECT_FALSE(IsDns1123Label("team.a"));
  EXPECT_FALSE(IsDns1123Label("team_a"));
}

TEST(ObjectNamesTest, Dns1035LabelStartsWithALetter) {
  EXPECT_TRUE(IsDns1035Label("llm-7"));
  EXPECT_FALSE(IsDns1035Label("7-llm"));
  EXPECT_FALSE(IsDns1035Label(""));
}

TEST(ObjectNamesTest, Dns1123SubdomainIsDottedLabelsUpTo253) {
  EXPECT_TRUE(IsDns1123Subdomain("torch-distributed"));
  EXPECT_TRUE(IsDns1123Subdomain("a.b.c"));
  EXPECT_FALSE(IsDns1123Subdomain("a..b"));
  EXPECT_FALSE(IsDns1123Subdomain(".a"));
  EXPECT_FALSE(IsDns1123Subdomain("a."));
  EXPECT_FALSE(IsDns1123Subdomain("A.b"));
  std::string long_name;
  while (long_name.size() < 250) long_name += "abcdefghi.";
  long_name += "abcd";  // 254 characters of valid labels
  EXPECT_FALSE(IsDns1123Subdomain(long_name));
  EXPECT_TRUE(IsDns1123Subdomain(long_name.substr(0, 249) + "abcd"));
}

}  // namespace
}  // namespace trainlet::trainjob
