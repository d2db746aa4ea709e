#include "agent/work_dir_state.h"

#include <openssl/evp.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <system_error>
#include <vector>

namespace trainlet::agent {
namespace fs = std::filesystem;
namespace {

constexpr std::uintmax_t kSampleBytes = 1 << 20;
constexpr size_t kMaxCheckpointFiles = 10000;

struct DigestFree {
  void operator()(EVP_MD_CTX* c) const { EVP_MD_CTX_free(c); }
};

// Feeds `path`'s first and last kSampleBytes (all of it when smaller) to `md`.
bool DigestSample(const fs::path& path, std::uintmax_t size, EVP_MD_CTX* md) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::vector<char> buf(static_cast<size_t>(std::min(size, kSampleBytes)));
  auto feed = [&](std::uintmax_t at, size_t n) {
    in.seekg(static_cast<std::streamoff>(at));
    in.read(buf.data(), static_cast<std::streamsize>(n));
    return in.gcount() == static_cast<std::streamsize>(n) &&
           EVP_DigestUpdate(md, buf.data(), n) == 1;
  };
  if (!feed(0, buf.size())) return false;
  if (size > kSampleBytes) {
    const std::uintmax_t tail = std::max(kSampleBytes, size - kSampleBytes);
    if (!feed(tail, static_cast<size_t>(size - tail))) return false;
  }
  const std::string size_text = std::to_string(size);
  return EVP_DigestUpdate(md, size_text.data(), size_text.size()) == 1;
}

int64_t MtimeMs(const fs::path& path) {
  std::error_code ec;
  const auto t = fs::last_write_time(path, ec);
  if (ec) return 0;
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::file_clock::to_sys(t).time_since_epoch())
      .count();
}

// The regular files of a checkpoint, in name order (itself when it is a file).
Result<std::vector<fs::path>> CheckpointFiles(const fs::path& root) {
  std::vector<fs::path> files;
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return std::vector<fs::path>{root};
  for (auto it = fs::recursive_directory_iterator(root, ec); !ec && it != fs::end(it);
       it.increment(ec)) {
    if (it->is_regular_file(ec)) files.push_back(it->path());
    if (files.size() > kMaxCheckpointFiles) {
      return InvalidError("more than " + std::to_string(kMaxCheckpointFiles) + " files");
    }
  }
  if (ec) return IoError(ec.message());
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

Status StampAttempt(const std::string& work_dir, const std::string& job, uint32_t attempt,
                    const std::string& node) {
  const fs::path path = fs::path(work_dir) / kAttemptStampFile;
  std::ofstream out(path, std::ios::trunc);
  out << job << " " << attempt << " " << node << "\n";
  if (!out.flush()) return IoError("cannot write " + path.string());
  return Status::Ok();
}

v1::WorkDirState ReadWorkDirState(const std::string& work_dir, const std::string& checkpoint_path) {
  v1::WorkDirState state;
  {
    std::ifstream in(fs::path(work_dir) / kAttemptStampFile);
    std::string job;
    uint32_t attempt = 0;
    if (in >> job >> attempt) state.set_last_attempt(attempt);
  }
  if (checkpoint_path.empty()) return state;
  const fs::path root = fs::path(work_dir) / checkpoint_path;  // an absolute path replaces
  state.set_checkpoint(root.string());
  std::error_code ec;
  if (!fs::exists(root, ec)) return state;
  state.set_checkpoint_exists(true);
  auto files = CheckpointFiles(root);
  if (!files.ok()) {
    state.set_error(files.status().message());
    return state;
  }
  std::unique_ptr<EVP_MD_CTX, DigestFree> md(EVP_MD_CTX_new());
  if (md == nullptr || EVP_DigestInit_ex(md.get(), EVP_sha256(), nullptr) != 1) {
    state.set_error("SHA-256 is not available");
    return state;
  }
  uint64_t bytes = 0;
  int64_t newest = 0;
  for (const fs::path& f : *files) {
    const std::uintmax_t size = fs::file_size(f, ec);
    const std::string name = f.lexically_relative(root).string();
    if (ec || EVP_DigestUpdate(md.get(), name.c_str(), name.size() + 1) != 1 ||
        !DigestSample(f, size, md.get())) {
      state.set_error("cannot read " + f.string());
      return state;
    }
    bytes += size;
    newest = std::max(newest, MtimeMs(f));
  }
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_DigestFinal_ex(md.get(), digest, &n);
  static const char kHex[] = "0123456789abcdef";
  std::string hex;
  for (unsigned int i = 0; i < n; ++i) {
    hex += kHex[digest[i] >> 4];
    hex += kHex[digest[i] & 15];
  }
  state.set_checkpoint_bytes(bytes);
  state.set_checkpoint_mtime_ms(newest);
  state.set_checkpoint_sha256(hex);
  return state;
}

}  // namespace trainlet::agent
