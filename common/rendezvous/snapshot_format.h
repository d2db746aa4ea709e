// The rendezvous snapshot: every pair a fence published, in one file a rank maps and searches
// without a round trip to its agent.
//
// Layout (all integers little-endian, as every platform trainlet runs on is):
//   header  (32 bytes): magic "TLRDZSN1", u64 epoch, u64 count, u64 total file size
//   index   (count x 24 bytes, sorted by key, bytewise, strictly increasing):
//           u64 key_offset, u32 key_len, u32 value_len, u64 value_offset
//   data    key and value bytes; every offset is from the start of the file
//
// The agent writes it (WriteSnapshotFile: a temporary file renamed over the target, so a reader
// sees the old file or the new one, never half of one). ParseSnapshot trusts nothing: a file a
// rank maps could be truncated or overwritten, so every offset and length is checked against the
// file's size and the keys' order is checked before any binary search relies on it.
//
// Plain functions and values; no state, safe from any thread.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"

namespace trainlet::rendezvous {

inline constexpr char kSnapshotMagic[8] = {'T', 'L', 'R', 'D', 'Z', 'S', 'N', '1'};
inline constexpr size_t kSnapshotHeaderBytes = 32;
inline constexpr size_t kSnapshotEntryBytes = 24;

// The file's bytes for `pairs` (std::map order is the bytewise order the format needs).
std::string EncodeSnapshot(uint64_t epoch, const std::map<std::string, std::string>& pairs);

// Writes EncodeSnapshot(...) to `path` through `path`.tmp and rename(2), mode 0600: readable by
// its owner only. `owner` (a uid, when not -1): the file is given to that user (fchown, before it
// holds anything), for ranks that run as another user than the writer; the writer, root then,
// reads it anyway. kIo naming the path when the file system refuses.
Status WriteSnapshotFile(const std::string& path, uint64_t epoch,
                         const std::map<std::string, std::string>& pairs,
                         uid_t owner = static_cast<uid_t>(-1));

// A checked view of snapshot bytes it does not own (a mapping, a string): valid while they are.
class SnapshotView {
 public:
  SnapshotView() = default;
  // Invalid, saying which part is wrong, unless every offset, length and the order hold.
  static Result<SnapshotView> Parse(const void* data, size_t size);

  uint64_t epoch() const { return epoch_; }
  size_t size() const { return count_; }
  std::string_view key(size_t i) const;
  std::string_view value(size_t i) const;
  // Binary search; nullopt when absent.
  std::optional<std::string_view> Find(std::string_view key) const;

 private:
  const unsigned char* data_ = nullptr;
  uint64_t epoch_ = 0;
  size_t count_ = 0;
};

// A snapshot file mapped read-only. Move-only; unmaps when destroyed.
class MappedSnapshot {
 public:
  MappedSnapshot() = default;
  // kIo naming the path when it cannot be opened or mapped; kInvalid when its bytes do not parse.
  static Result<MappedSnapshot> Open(const std::string& path);
  MappedSnapshot(MappedSnapshot&& other) noexcept;
  MappedSnapshot& operator=(MappedSnapshot&& other) noexcept;
  MappedSnapshot(const MappedSnapshot&) = delete;
  MappedSnapshot& operator=(const MappedSnapshot&) = delete;
  ~MappedSnapshot();

  const SnapshotView& view() const { return view_; }
  bool mapped() const { return base_ != nullptr; }

 private:
  void Reset();
  void* base_ = nullptr;
  size_t length_ = 0;
  SnapshotView view_;
};

}  // namespace trainlet::rendezvous
