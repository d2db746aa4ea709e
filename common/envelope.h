// One protobuf Envelope per ZeroMQ message. Decoding enforces the caps of DESIGN.md before
// parsing, and classifies every rejected message so the daemons can count drops by reason.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/status.h"
#include "trainlet/v1/envelope.pb.h"

namespace trainlet {

inline constexpr uint32_t kProtocolVersion = 1;
// Largest payload frame accepted. A launch plan for 1,000 local ranks is well under 1 MiB; the
// cap exists so a hostile peer cannot make a daemon allocate without bound.
inline constexpr size_t kMaxMessageBytes = 8u << 20;

enum class DropReason : uint8_t {
  kTooManyFrames,
  kTooLarge,
  kMalformed,     // not a protobuf Envelope
  kBadVersion,    // version missing (0) or not ours
  kTypeMismatch,  // type missing, or not the body that is set
  kUnexpected,    // well formed, but not a message this endpoint or this peer may send
  kUnauthorized,  // the sender's key may not send this
  kCount,
};
const char* DropReasonName(DropReason reason);

// What went wrong with a received message: the reason (for counters) and a line for the log.
struct DecodeError {
  DropReason reason;
  std::string detail;
};

// Parses `size` bytes into `out`. Never throws, never aborts, whatever the bytes.
// Returns nullopt on success.
std::optional<DecodeError> DecodeEnvelope(const void* data, size_t size, v1::Envelope& out);

// Sets version and the type that matches the body that is set, and serialises.
// The body must be set: an envelope without one is a bug.
std::string EncodeEnvelope(v1::Envelope& envelope);

// The MessageType a body case must carry.
v1::MessageType TypeForBody(v1::Envelope::BodyCase body);

// Counts dropped messages by reason. Owned by one event loop.
class DropCounters {
 public:
  void Add(DropReason r) { ++counts_[static_cast<size_t>(r)]; }
  uint64_t Get(DropReason r) const { return counts_[static_cast<size_t>(r)]; }
  uint64_t Total() const;

 private:
  std::array<uint64_t, static_cast<size_t>(DropReason::kCount)> counts_{};
};

}  // namespace trainlet
