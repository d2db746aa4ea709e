// What a trainlet-exec session keeps on disk, so that it outlives the agent (DESIGN "State and
// scale"): <state_dir>/exec/<exec id>/ holds
//   session.json   the session's identity and how many bytes of each stream the coordinator has
//                  relayed (ExecSessionRecord), rewritten (tmp + rename) as acknowledgements come
//   stdout, stderr what the command wrote, appended by the command itself (it runs under a step,
//                  with these files as its stdout and stderr), read by the agent with OutputTail
//
// Why acknowledged counts and not sent ones: bytes the agent had sent, but that sat in its
// socket's queue when it was killed, never reach the coordinator. A restarted agent resends from
// the acknowledged counts instead, and the coordinator drops the part it relayed already (each
// ExecOutput carries its offset), so nothing is lost and nothing is repeated. The record is not
// fsync'd: the page cache outlives the agent, and a crash of the machine ends the command anyway.
//
// Pure data and file I/O; safe from any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "common/status.h"

namespace trainlet::agent {

inline constexpr int kExecRecordVersion = 1;

struct ExecSessionRecord {
  uint64_t exec_id = 0;  // the coordinator's id of the session
  std::string job;
  uint32_t attempt = 0;
  uint32_t rank = 0;          // the session's rank number in the supervisor (>= kExecRankBase)
  uint32_t grace_ms = 0;      // SIGTERM to SIGKILL when it is cancelled
  uint64_t acked_stdout = 0;  // bytes of stdout the coordinator has relayed
  uint64_t acked_stderr = 0;

  bool operator==(const ExecSessionRecord&) const = default;
};

std::string EncodeExecRecord(const ExecSessionRecord& record);
// Errors (Invalid) name the field at fault.
Result<ExecSessionRecord> DecodeExecRecord(const std::string& text);
// Written to `path`.tmp (0600), then renamed over `path`.
Status WriteExecRecord(const std::string& path, const ExecSessionRecord& record);
// NotFound when missing, Io when unreadable, Invalid when not a record; errors name the path.
Result<ExecSessionRecord> ReadExecRecord(const std::string& path);

// Follows one output file that a process appends to: each ReadNew hands over the bytes written
// since the last one, with their offset in the file. Owns its descriptor; movable, not copyable.
class OutputTail {
 public:
  static constexpr size_t kChunkBytes = 64 * 1024;  // at most this much per emitted chunk
  using Emit = std::function<void(uint64_t offset, std::string_view data)>;

  OutputTail() = default;
  ~OutputTail();
  OutputTail(OutputTail&& other) noexcept;
  OutputTail& operator=(OutputTail&& other) noexcept;
  OutputTail(const OutputTail&) = delete;
  OutputTail& operator=(const OutputTail&) = delete;

  // Opens `path` (which must exist) to be read from byte `offset` on. Errors (Io) name the path.
  Status Open(const std::string& path, uint64_t offset);
  // Emits everything from offset() to the current end of the file, in order, in chunks of at
  // most kChunkBytes, and moves offset() past it. Errors (Io) name the path; what was emitted
  // before the error stands.
  Status ReadNew(const Emit& emit);
  void Close();
  bool is_open() const { return fd_ >= 0; }
  uint64_t offset() const { return offset_; }

 private:
  int fd_ = -1;
  uint64_t offset_ = 0;
  std::string path_;
};

}  // namespace trainlet::agent
