// Progress tokens: scoped to one (job, attempt), bound to the node's secret, tamper-evident.
#include "agent/progress_token.h"

#include <gtest/gtest.h>

namespace trainlet::agent {
namespace {

const std::string kSecret(ProgressTokens::kSecretBytes, 's');

TEST(ProgressTokens, AnIssuedTokenNamesItsJobAndAttempt) {
  ProgressTokens tokens(kSecret);
  const std::string t = tokens.Issue("train-1", 3);
  EXPECT_EQ(t.rfind("tlp1.", 0), 0u) << t;
  auto claim = tokens.Verify(t);
  ASSERT_TRUE(claim.ok()) << claim.status().message();
  EXPECT_EQ(claim->job, "train-1");
  EXPECT_EQ(claim->attempt, 3u);
  // Another job's and another attempt's tokens are other tokens.
  EXPECT_NE(tokens.Issue("train-2", 3), t);
  EXPECT_NE(tokens.Issue("train-1", 4), t);
  // A restarted agent (same secret) accepts the tokens its ranks already hold.
  EXPECT_TRUE(ProgressTokens(kSecret).Verify(t).ok());
}

TEST(ProgressTokens, RefusesForgedAlteredAndForeignTokens) {
  ProgressTokens tokens(kSecret);
  const std::string t = tokens.Issue("train-1", 3);
  auto refused = [&](const std::string& token) {
    auto r = tokens.Verify(token);
    return !r.ok() && r.status().code() == ErrorCode::kPermission;
  };
  EXPECT_TRUE(refused(""));
  EXPECT_TRUE(refused("garbage"));
  EXPECT_TRUE(refused(t + "."));
  EXPECT_TRUE(refused("tlp2" + t.substr(4)));
  // Another node's secret.
  EXPECT_TRUE(refused(ProgressTokens(std::string(32, 'x')).Issue("train-1", 3)));
  // The attempt raised by hand, the job renamed, the MAC flipped: the MAC no longer matches.
  const size_t b = t.find('.', 5);
  const size_t c = t.find('.', b + 1);
  EXPECT_TRUE(refused(t.substr(0, b + 1) + "4" + t.substr(c)));
  EXPECT_TRUE(refused(t.substr(0, b + 1) + "03" + t.substr(c)));  // not the canonical number
  EXPECT_TRUE(refused("tlp1.dHJhaW4tMg" + t.substr(b)));          // "train-2"
  // "train-1" spelt with the last character's spare bits set: the same bytes, another spelling
  // (found by progress_body_fuzz).
  const std::string job_text = t.substr(5, b - 5);
  ASSERT_EQ(job_text, "dHJhaW4tMQ");
  EXPECT_TRUE(refused("tlp1.dHJhaW4tMR" + t.substr(b)));
  std::string flipped = t;
  flipped.back() = flipped.back() == 'A' ? 'B' : 'A';
  EXPECT_TRUE(refused(flipped));
  EXPECT_TRUE(refused(t.substr(0, t.size() - 2)));
}

}  // namespace
}  // namespace trainlet::agent
