// PurgeTombstone (coordinator/missed_purges_tombstone.h): a missed purge as the store keeps it,
// one cluster value per (node, job), read back exactly, and refused by name when it is not one.
#include "coordinator/missed_purges_tombstone.h"

#include <gtest/gtest.h>

namespace trainlet::coordinator {
namespace {

TEST(PurgeTombstone, RoundTripsThroughItsKeyAndValue) {
  const PurgeTombstone t{"node-1.example", "train-a", "0123abcd", 1764000000123, true};
  EXPECT_EQ(t.Key(), "missed-purge/node-1.example/train-a");
  auto back = DecodePurgeTombstone(t.Key(), t.Value());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, t);
  const PurgeTombstone no_uid{"n", "j", "", 0, false};
  EXPECT_EQ(*DecodePurgeTombstone(no_uid.Key(), no_uid.Value()), no_uid);
}

TEST(PurgeTombstone, ANodeNameWithASlashStillSplitsAtTheJob) {
  const PurgeTombstone t{"rack/7", "job", "u", 1, false};
  auto back = DecodePurgeTombstone(t.Key(), t.Value());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->node, "rack/7");
  EXPECT_EQ(back->job, "job");
}

TEST(PurgeTombstone, WhatIsNotOneIsRefusedByName) {
  const std::string good = PurgeTombstone{"n", "j", "u", 1, false}.Value();
  struct Case {
    std::string key, value, says;
  };
  for (const Case& c : std::vector<Case>{
           {"fair-share-history", good, "not under missed-purge/"},
           {"missed-purge/only-one", good, "<node>/<job>"},
           {"missed-purge/n/", good, "<node>/<job>"},
           {"missed-purge//j", good, "<node>/<job>"},
           {"missed-purge/n/j", "not json", "not a JSON object"},
           {"missed-purge/n/j", R"({"version":2,"uid":"u","deletedMs":1,"shared":false})",
            "version is not 1"},
           {"missed-purge/n/j", R"({"version":1,"uid":7,"deletedMs":1,"shared":false})",
            "uid (string)"},
           {"missed-purge/n/j", R"({"version":1,"uid":"u","deletedMs":"1","shared":false})",
            "deletedMs (integer)"},
           {"missed-purge/n/j", R"({"version":1,"uid":"u","deletedMs":1})", "shared (boolean)"},
       }) {
    auto r = DecodePurgeTombstone(c.key, c.value);
    ASSERT_FALSE(r.ok()) << c.key << " " << c.value;
    EXPECT_EQ(r.status().code(), ErrorCode::kInvalid);
    EXPECT_NE(r.status().message().find(c.says), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find(c.key), std::string::npos) << r.status().message();
  }
}

}  // namespace
}  // namespace trainlet::coordinator
