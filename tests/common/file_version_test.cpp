// FileVersion (common/file_version.h): which reads of a reloaded file (the access policy, the
// CURVE allowlists) are new versions, with the stamps made up so that the kernel's coarse file
// clock is not needed to show a rewrite that keeps every stamp.
#include "common/file_version.h"

#include <gtest/gtest.h>

#include <ctime>

namespace trainlet {
namespace {

struct stat Stamps(time_t mtime_sec, off_t size, ino_t ino = 7) {
  struct stat st {};
  st.st_mtim.tv_sec = mtime_sec;
  st.st_ctim.tv_sec = mtime_sec;
  st.st_size = size;
  st.st_ino = ino;
  return st;
}

TEST(FileVersion, ARewriteThatKeepsEveryStampIsSeenByItsTextWhileUnsettled) {
  const time_t now = time(nullptr);
  FileVersion v;
  EXPECT_FALSE(v.known());
  EXPECT_TRUE(v.Update(Stamps(now, 4), "abcd"));
  EXPECT_TRUE(v.known());
  // Written less than a second ago: the same stamps do not say the file is the same.
  EXPECT_FALSE(v.Unchanged(Stamps(now, 4)));
  EXPECT_FALSE(v.Update(Stamps(now, 4), "abcd")) << "the same text is not a new version";
  EXPECT_TRUE(v.Update(Stamps(now, 4), "wxyz")) << "same size, same times, new text";
  EXPECT_EQ(v.text(), "wxyz");
}

TEST(FileVersion, ASettledVersionIsTrustedByItsStamps) {
  const time_t old = time(nullptr) - 5;
  FileVersion v;
  EXPECT_TRUE(v.Update(Stamps(old, 4), "abcd"));
  EXPECT_TRUE(v.Unchanged(Stamps(old, 4)));
  EXPECT_FALSE(v.Unchanged(Stamps(old, 5))) << "an append";
  EXPECT_FALSE(v.Unchanged(Stamps(old, 4, 8))) << "replaced by a rename";
  EXPECT_FALSE(v.Unchanged(Stamps(old + 1, 4))) << "rewritten later";
}

TEST(FileVersion, AForgottenVersionIsNewAgain) {
  const time_t old = time(nullptr) - 5;
  FileVersion v;
  EXPECT_TRUE(v.Update(Stamps(old, 4), "abcd"));
  v.Forget();
  EXPECT_FALSE(v.known());
  EXPECT_FALSE(v.Unchanged(Stamps(old, 4)));
  EXPECT_TRUE(v.Update(Stamps(old, 4), "abcd")) << "the file came back";
}

TEST(FileVersion, ReadFileTextNamesAFileItCannotRead) {
  auto text = ReadFileText("/nonexistent/trainlet-file-version");
  ASSERT_FALSE(text.ok());
  EXPECT_NE(text.status().message().find("/nonexistent/trainlet-file-version"), std::string::npos);
}

}  // namespace
}  // namespace trainlet
