// LastLogLine: the last non-empty line of a log, read from its end, cut to 256 bytes of UTF-8.
#include "agent/log_tail.h"

#include <gtest/gtest.h>

#include <fstream>

#include "tests/common/test_dir.h"

namespace trainlet::agent {
namespace {

std::string Write(const testing::TempDir& dir, const std::string& text) {
  const std::string path = dir.path() + "/rank.log";
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
  return path;
}

TEST(LastLogLine, TheLastLineWithTextWithoutItsEnding) {
  testing::TempDir dir;
  EXPECT_EQ(LastLogLine(Write(dir, "one\ntwo\nthree\n")), "three");
  EXPECT_EQ(LastLogLine(Write(dir, "one\ntwo")), "two");
  EXPECT_EQ(LastLogLine(Write(dir, "one\r\nboom: it failed  \r\n\n   \n\t\n")), "boom: it failed");
  EXPECT_EQ(LastLogLine(Write(dir, "  indented\n")), "indented");
}

TEST(LastLogLine, EmptyForMissingEmptyOrBlankLogs) {
  testing::TempDir dir;
  EXPECT_EQ(LastLogLine(dir.path() + "/missing.log"), "");
  EXPECT_EQ(LastLogLine(Write(dir, "")), "");
  EXPECT_EQ(LastLogLine(Write(dir, "\n\n  \n")), "");
}

TEST(LastLogLine, ReadsOnlyTheEndOfABigLog) {
  testing::TempDir dir;
  std::string big(3 << 20, 'x');
  big += "\nthe reason\n";
  EXPECT_EQ(LastLogLine(Write(dir, big)), "the reason");
  // A last line longer than the window: its tail, cut to the limit.
  EXPECT_EQ(LastLogLine(Write(dir, std::string(10000, 'y') + "\n")), std::string(256, 'y'));
}

TEST(LastLogLine, CutsAtACharacterBoundaryAndReplacesBadBytes) {
  testing::TempDir dir;
  const std::string e_acute = "\xC3\xA9";  // two bytes
  std::string line = "a";
  for (int i = 0; i < 200; ++i) line += e_acute;  // 401 bytes
  const std::string got = LastLogLine(Write(dir, line + "\n"));
  EXPECT_EQ(got.size(), 255u);  // "a" and 127 whole characters: the 128th would pass 256
  EXPECT_EQ(
      got, "a" + [&] {
        std::string s;
        for (int i = 0; i < 127; ++i) s += e_acute;
        return s;
      }());
  EXPECT_EQ(LastLogLine(Write(dir, "bad \xFF\xC3 bytes\n")), "bad ?? bytes");
  EXPECT_EQ(LastLogLine(Write(dir, "x\n"), 0), "");
}

// Issue 19: a follower's offset past the end of a log that was cut since (log rotation) starts
// again from 0, so `logs -f` shows the note and what follows; today's main read nothing forever.
TEST(ReadLogSlice, StartsAgainFromZeroOnceTheLogWasCut) {
  testing::TempDir dir;
  const std::string path = Write(dir, "0123456789");
  auto slice = ReadLogSlice(path, 4, 3);
  ASSERT_TRUE(slice.has_value());
  EXPECT_EQ(slice->data, "456");
  EXPECT_EQ(slice->next_offset, 7u);
  EXPECT_FALSE(slice->eof);
  slice = ReadLogSlice(path, 10, 0);
  ASSERT_TRUE(slice.has_value());
  EXPECT_EQ(slice->data, "");
  EXPECT_TRUE(slice->eof);
  std::ofstream(path, std::ios::trunc) << "note\n";  // cut under the follower
  slice = ReadLogSlice(path, 10, 0);
  ASSERT_TRUE(slice.has_value());
  EXPECT_EQ(slice->data, "note\n");
  EXPECT_EQ(slice->next_offset, 5u);
  EXPECT_FALSE(ReadLogSlice(dir.File("missing.log"), 0, 0).has_value());
}

TEST(Utf8CharLength, WholeCharactersOnly) {
  auto len = [](const std::string& s) {
    return Utf8CharLength(reinterpret_cast<const unsigned char*>(s.data()), s.size());
  };
  EXPECT_EQ(len("a"), 1u);
  EXPECT_EQ(len("\xC3\xA9"), 2u);
  EXPECT_EQ(len("\xE2\x82\xAC"), 3u);
  EXPECT_EQ(len("\xF0\x9F\x98\x80"), 4u);
  EXPECT_EQ(len("\xC3"), 0u);          // cut short
  EXPECT_EQ(len("\xC0\x80"), 0u);      // overlong
  EXPECT_EQ(len("\xED\xA0\x80"), 0u);  // a surrogate
  EXPECT_EQ(len("\xF4\x90\x80\x80"), 0u);
  EXPECT_EQ(len(""), 0u);
}

}  // namespace
}  // namespace trainlet::agent
