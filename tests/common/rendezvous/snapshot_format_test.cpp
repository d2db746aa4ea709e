#include "common/rendezvous/snapshot_format.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

namespace trainlet::rendezvous {
namespace {

std::map<std::string, std::string> Sample() {
  return {{"addr/0", "10.0.0.1:29500"},
          {"addr/1", "10.0.0.2:29500"},
          {"b", ""},
          {std::string("bin\0key", 7), std::string("\0\1\2", 3)},
          {"zzz", "last"}};
}

TEST(SnapshotFormat, RoundTripAndFind) {
  const std::string bytes = EncodeSnapshot(7, Sample());
  auto view = SnapshotView::Parse(bytes.data(), bytes.size());
  ASSERT_TRUE(view.ok()) << view.status().message();
  EXPECT_EQ(view->epoch(), 7u);
  ASSERT_EQ(view->size(), 5u);
  size_t i = 0;
  for (const auto& [k, v] : Sample()) {
    EXPECT_EQ(view->key(i), k);
    EXPECT_EQ(view->value(i), v);
    ++i;
    auto found = view->Find(k);
    ASSERT_TRUE(found.has_value()) << k;
    EXPECT_EQ(*found, v);
  }
  EXPECT_FALSE(view->Find("addr/2").has_value());
  EXPECT_FALSE(view->Find("").has_value());
  EXPECT_FALSE(view->Find("zzzz").has_value());
}

TEST(SnapshotFormat, EmptyTable) {
  const std::string bytes = EncodeSnapshot(1, {});
  EXPECT_EQ(bytes.size(), kSnapshotHeaderBytes);
  auto view = SnapshotView::Parse(bytes.data(), bytes.size());
  ASSERT_TRUE(view.ok());
  EXPECT_EQ(view->size(), 0u);
  EXPECT_FALSE(view->Find("x").has_value());
}

TEST(SnapshotFormat, RejectsDamage) {
  const std::string good = EncodeSnapshot(3, Sample());
  auto parse = [](const std::string& b) { return SnapshotView::Parse(b.data(), b.size()); };
  // Truncated anywhere: the size in the header no longer matches.
  for (size_t n = 0; n < good.size(); n += 7) {
    EXPECT_FALSE(parse(good.substr(0, n)).ok()) << n;
  }
  std::string bad = good;
  bad[0] = 'X';
  EXPECT_NE(parse(bad).status().message().find("magic"), std::string::npos);
  // A count that would run past the end.
  bad = good;
  const uint64_t huge = UINT64_MAX / 2;
  std::memcpy(bad.data() + 16, &huge, 8);
  EXPECT_FALSE(parse(bad).ok());
  // A key offset into the header, then one past the end, then one that wraps.
  for (uint64_t off : {uint64_t{0}, uint64_t{good.size()}, UINT64_MAX - 2}) {
    bad = good;
    std::memcpy(bad.data() + kSnapshotHeaderBytes, &off, 8);
    EXPECT_FALSE(parse(bad).ok()) << off;
  }
  // A value length past the end.
  bad = good;
  const uint32_t long_len = 1u << 30;
  std::memcpy(bad.data() + kSnapshotHeaderBytes + 12, &long_len, 4);
  EXPECT_FALSE(parse(bad).ok());
  // Out of order: swap the first two index entries.
  bad = good;
  std::string first = bad.substr(kSnapshotHeaderBytes, kSnapshotEntryBytes);
  std::memcpy(bad.data() + kSnapshotHeaderBytes,
              good.data() + kSnapshotHeaderBytes + kSnapshotEntryBytes, kSnapshotEntryBytes);
  std::memcpy(bad.data() + kSnapshotHeaderBytes + kSnapshotEntryBytes, first.data(),
              kSnapshotEntryBytes);
  EXPECT_NE(parse(bad).status().message().find("out of order"), std::string::npos);
  EXPECT_FALSE(SnapshotView::Parse(nullptr, 0).ok());
}

TEST(SnapshotFormat, FileWriteAndMap) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("rdzv-snap-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "s.snap").string();
  ASSERT_TRUE(WriteSnapshotFile(path, 2, Sample()).ok());
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  EXPECT_EQ(std::filesystem::status(path).permissions() & std::filesystem::perms::all,
            std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  auto snap = MappedSnapshot::Open(path);
  ASSERT_TRUE(snap.ok()) << snap.status().message();
  // Replacing the file does not disturb a mapping of the old one.
  ASSERT_TRUE(WriteSnapshotFile(path, 3, {{"other", "x"}}).ok());
  EXPECT_EQ(snap->view().epoch(), 2u);
  EXPECT_EQ(*snap->view().Find("zzz"), "last");
  MappedSnapshot moved = std::move(snap).value();
  EXPECT_EQ(moved.view().size(), 5u);
  EXPECT_EQ(MappedSnapshot::Open((dir / "missing").string()).status().code(), ErrorCode::kIo);
  std::filesystem::resize_file(path, 40);
  EXPECT_EQ(MappedSnapshot::Open(path).status().code(), ErrorCode::kInvalid);
  EXPECT_EQ(WriteSnapshotFile((dir / "no/such/dir/x").string(), 1, {}).code(), ErrorCode::kIo);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace trainlet::rendezvous
