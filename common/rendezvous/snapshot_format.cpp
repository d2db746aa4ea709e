#include "common/rendezvous/snapshot_format.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>

namespace trainlet::rendezvous {
namespace {

static_assert(std::endian::native == std::endian::little,
              "the snapshot format is little-endian; add byte swaps for this platform");

void PutU64(std::string& out, size_t at, uint64_t v) { std::memcpy(out.data() + at, &v, 8); }
void PutU32(std::string& out, size_t at, uint32_t v) { std::memcpy(out.data() + at, &v, 4); }
uint64_t GetU64(const unsigned char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
uint32_t GetU32(const unsigned char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

}  // namespace

std::string EncodeSnapshot(uint64_t epoch, const std::map<std::string, std::string>& pairs) {
  size_t data_bytes = 0;
  for (const auto& [k, v] : pairs) data_bytes += k.size() + v.size();
  const size_t index_end = kSnapshotHeaderBytes + pairs.size() * kSnapshotEntryBytes;
  std::string out(index_end + data_bytes, '\0');
  std::memcpy(out.data(), kSnapshotMagic, sizeof kSnapshotMagic);
  PutU64(out, 8, epoch);
  PutU64(out, 16, pairs.size());
  PutU64(out, 24, out.size());
  size_t entry = kSnapshotHeaderBytes;
  size_t data = index_end;
  for (const auto& [k, v] : pairs) {
    PutU64(out, entry, data);
    PutU32(out, entry + 8, static_cast<uint32_t>(k.size()));
    PutU32(out, entry + 12, static_cast<uint32_t>(v.size()));
    std::memcpy(out.data() + data, k.data(), k.size());
    data += k.size();
    PutU64(out, entry + 16, data);
    std::memcpy(out.data() + data, v.data(), v.size());
    data += v.size();
    entry += kSnapshotEntryBytes;
  }
  return out;
}

Status WriteSnapshotFile(const std::string& path, uint64_t epoch,
                         const std::map<std::string, std::string>& pairs, uid_t owner) {
  const std::string bytes = EncodeSnapshot(epoch, pairs);
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return IoError("rendezvous snapshot " + tmp + ": " + std::strerror(errno));
  if (owner != static_cast<uid_t>(-1) && ::fchown(fd, owner, static_cast<gid_t>(-1)) != 0) {
    const int err = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    return IoError("rendezvous snapshot " + tmp + ": fchown to uid " + std::to_string(owner) +
                   ": " + std::strerror(err));
  }
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      return IoError("rendezvous snapshot " + tmp + ": " + std::strerror(err));
    }
    done += static_cast<size_t>(n);
  }
  // No fsync: the file lives only as long as the attempt on this node, and a crash ends both.
  if (::close(fd) != 0) return IoError("rendezvous snapshot " + tmp + ": " + std::strerror(errno));
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return IoError("rendezvous snapshot " + path + ": " + std::strerror(err));
  }
  return Status::Ok();
}

Result<SnapshotView> SnapshotView::Parse(const void* data, size_t size) {
  const auto* p = static_cast<const unsigned char*>(data);
  if (p == nullptr || size < kSnapshotHeaderBytes) {
    return InvalidError("rendezvous snapshot: " + std::to_string(size) +
                        " bytes, shorter than its header");
  }
  if (std::memcmp(p, kSnapshotMagic, sizeof kSnapshotMagic) != 0) {
    return InvalidError("rendezvous snapshot: bad magic");
  }
  const uint64_t count = GetU64(p + 16);
  const uint64_t total = GetU64(p + 24);
  if (total != size) {
    return InvalidError("rendezvous snapshot: header says " + std::to_string(total) +
                        " bytes, the file has " + std::to_string(size));
  }
  if (count > (size - kSnapshotHeaderBytes) / kSnapshotEntryBytes) {
    return InvalidError("rendezvous snapshot: " + std::to_string(count) +
                        " entries do not fit in the file");
  }
  const uint64_t data_start = kSnapshotHeaderBytes + count * kSnapshotEntryBytes;
  SnapshotView view;
  view.data_ = p;
  view.epoch_ = GetU64(p + 8);
  view.count_ = static_cast<size_t>(count);
  for (size_t i = 0; i < view.count_; ++i) {
    const unsigned char* e = p + kSnapshotHeaderBytes + i * kSnapshotEntryBytes;
    const uint64_t key_off = GetU64(e), val_off = GetU64(e + 16);
    const uint64_t key_len = GetU32(e + 8), val_len = GetU32(e + 12);
    // Subtraction form: offsets near 2^64 must not wrap past the check.
    if (key_off < data_start || key_off > size || key_len > size - key_off ||
        val_off < data_start || val_off > size || val_len > size - val_off) {
      return InvalidError("rendezvous snapshot: entry " + std::to_string(i) +
                          " points outside the data");
    }
    if (i > 0 && !(view.key(i - 1) < view.key(i))) {
      return InvalidError("rendezvous snapshot: entry " + std::to_string(i) +
                          " is out of order or repeats a key");
    }
  }
  return view;
}

std::string_view SnapshotView::key(size_t i) const {
  const unsigned char* e = data_ + kSnapshotHeaderBytes + i * kSnapshotEntryBytes;
  return {reinterpret_cast<const char*>(data_ + GetU64(e)), GetU32(e + 8)};
}

std::string_view SnapshotView::value(size_t i) const {
  const unsigned char* e = data_ + kSnapshotHeaderBytes + i * kSnapshotEntryBytes;
  return {reinterpret_cast<const char*>(data_ + GetU64(e + 16)), GetU32(e + 12)};
}

std::optional<std::string_view> SnapshotView::Find(std::string_view k) const {
  size_t lo = 0, hi = count_;
  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2;
    const int c = key(mid).compare(k);
    if (c == 0) return value(mid);
    if (c < 0) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return std::nullopt;
}

Result<MappedSnapshot> MappedSnapshot::Open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return IoError("rendezvous snapshot " + path + ": " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return IoError("rendezvous snapshot " + path + ": " + std::strerror(err));
  }
  const size_t length = static_cast<size_t>(st.st_size);
  if (length < kSnapshotHeaderBytes) {
    ::close(fd);
    return InvalidError("rendezvous snapshot " + path + ": " + std::to_string(length) +
                        " bytes, shorter than its header");
  }
  void* base = ::mmap(nullptr, length, PROT_READ, MAP_SHARED, fd, 0);
  const int err = errno;
  ::close(fd);  // the mapping keeps the file
  if (base == MAP_FAILED)
    return IoError("rendezvous snapshot " + path + ": mmap: " + std::strerror(err));
  MappedSnapshot m;
  m.base_ = base;
  m.length_ = length;
  auto view = SnapshotView::Parse(base, length);
  if (!view.ok()) return Status(view.status().code(), path + ": " + view.status().message());
  m.view_ = *view;
  return m;
}

MappedSnapshot::MappedSnapshot(MappedSnapshot&& other) noexcept { *this = std::move(other); }

MappedSnapshot& MappedSnapshot::operator=(MappedSnapshot&& other) noexcept {
  if (this != &other) {
    Reset();
    base_ = other.base_;
    length_ = other.length_;
    view_ = other.view_;
    other.base_ = nullptr;
    other.length_ = 0;
    other.view_ = SnapshotView();
  }
  return *this;
}

MappedSnapshot::~MappedSnapshot() { Reset(); }

void MappedSnapshot::Reset() {
  if (base_ != nullptr) ::munmap(base_, length_);
  base_ = nullptr;
  length_ = 0;
  view_ = SnapshotView();
}

}  // namespace trainlet::rendezvous
