#include "agent/exec_output_files.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <utility>

#include "agent/step/private_file.h"

namespace trainlet::agent {
namespace {

using json = nlohmann::json;

// A non-negative integer field that fits in `max`, or an error naming it.
Status GetUnsigned(const json& doc, const char* key, uint64_t max, uint64_t* out) {
  auto it = doc.find(key);
  if (it == doc.end()) return InvalidError(std::string(key) + ": missing");
  if (!it->is_number_unsigned() && !(it->is_number_integer() && it->get<int64_t>() >= 0)) {
    return InvalidError(std::string(key) + ": not a non-negative integer");
  }
  const uint64_t v = it->get<uint64_t>();
  if (v > max) return InvalidError(std::string(key) + ": out of range");
  *out = v;
  return Status::Ok();
}

}  // namespace

std::string EncodeExecRecord(const ExecSessionRecord& r) {
  json doc = {{"version", kExecRecordVersion},
              {"exec_id", r.exec_id},
              {"job", r.job},
              {"attempt", r.attempt},
              {"rank", r.rank},
              {"grace_ms", r.grace_ms},
              {"acked_stdout", r.acked_stdout},
              {"acked_stderr", r.acked_stderr}};
  return doc.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}

Result<ExecSessionRecord> DecodeExecRecord(const std::string& text) {
  json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return InvalidError("not valid JSON");
  if (!doc.is_object()) return InvalidError("not a JSON object");
  uint64_t version = 0, attempt = 0, rank = 0, grace = 0;
  ExecSessionRecord r;
  TRAINLET_RETURN_IF_ERROR(GetUnsigned(doc, "version", UINT32_MAX, &version));
  if (version != kExecRecordVersion) {
    return InvalidError("version: " + std::to_string(version) + " is not " +
                        std::to_string(kExecRecordVersion));
  }
  TRAINLET_RETURN_IF_ERROR(GetUnsigned(doc, "exec_id", UINT64_MAX, &r.exec_id));
  TRAINLET_RETURN_IF_ERROR(GetUnsigned(doc, "attempt", UINT32_MAX, &attempt));
  TRAINLET_RETURN_IF_ERROR(GetUnsigned(doc, "rank", UINT32_MAX, &rank));
  TRAINLET_RETURN_IF_ERROR(GetUnsigned(doc, "grace_ms", UINT32_MAX, &grace));
  TRAINLET_RETURN_IF_ERROR(GetUnsigned(doc, "acked_stdout", UINT64_MAX, &r.acked_stdout));
  TRAINLET_RETURN_IF_ERROR(GetUnsigned(doc, "acked_stderr", UINT64_MAX, &r.acked_stderr));
  auto job = doc.find("job");
  if (job == doc.end() || !job->is_string()) return InvalidError("job: missing or not a string");
  r.job = job->get<std::string>();
  if (r.job.empty()) return InvalidError("job: empty");
  if (attempt == 0) return InvalidError("attempt: must be >= 1");
  r.attempt = static_cast<uint32_t>(attempt);
  r.rank = static_cast<uint32_t>(rank);
  r.grace_ms = static_cast<uint32_t>(grace);
  return r;
}

Status WriteExecRecord(const std::string& path, const ExecSessionRecord& record) {
  return step::ReplaceFile(path, EncodeExecRecord(record), "exec session record");
}

Result<ExecSessionRecord> ReadExecRecord(const std::string& path) {
  TRAINLET_ASSIGN_OR_RETURN(std::string text,
                            step::ReadPrivateFile(path, 1u << 20, "exec session record"));
  auto record = DecodeExecRecord(text);
  if (!record.ok()) {
    return InvalidError("exec session record " + path + ": " + record.status().message());
  }
  return record;
}

OutputTail::~OutputTail() { Close(); }

OutputTail::OutputTail(OutputTail&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), offset_(other.offset_), path_(std::move(other.path_)) {}

OutputTail& OutputTail::operator=(OutputTail&& other) noexcept {
  if (this != &other) {
    Close();
    fd_ = std::exchange(other.fd_, -1);
    offset_ = other.offset_;
    path_ = std::move(other.path_);
  }
  return *this;
}

void OutputTail::Close() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

Status OutputTail::Open(const std::string& path, uint64_t offset) {
  Close();
  path_ = path;
  offset_ = offset;
  fd_ = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) return IoError("exec output " + path + ": " + std::strerror(errno));
  return Status::Ok();
}

Status OutputTail::ReadNew(const Emit& emit) {
  if (fd_ < 0) return IoError("exec output " + path_ + ": not open");
  std::string buf(kChunkBytes, '\0');
  while (true) {
    const ssize_t n = pread(fd_, buf.data(), buf.size(), static_cast<off_t>(offset_));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return IoError("exec output " + path_ + ": " + std::strerror(errno));
    if (n == 0) return Status::Ok();
    const uint64_t at = offset_;
    offset_ += static_cast<uint64_t>(n);
    emit(at, std::string_view(buf.data(), static_cast<size_t>(n)));
  }
}

}  // namespace trainlet::agent
