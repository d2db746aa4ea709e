#include "common/envelope.h"

#include <numeric>

namespace trainlet {

const char* DropReasonName(DropReason reason) {
  switch (reason) {
    case DropReason::kTooManyFrames:
      return "too_many_frames";
    case DropReason::kTooLarge:
      return "too_large";
    case DropReason::kMalformed:
      return "malformed";
    case DropReason::kBadVersion:
      return "bad_version";
    case DropReason::kTypeMismatch:
      return "type_mismatch";
    case DropReason::kUnexpected:
      return "unexpected";
    case DropReason::kUnauthorized:
      return "unauthorized";
    case DropReason::kCount:
      break;
  }
  return "unknown";
}

uint64_t DropCounters::Total() const {
  return std::accumulate(counts_.begin(), counts_.end(), uint64_t{0});
}

v1::MessageType TypeForBody(v1::Envelope::BodyCase body) {
  using E = v1::Envelope;
  switch (body) {
    case E::kRegister:
      return v1::MESSAGE_TYPE_REGISTER;
    case E::kRegisterAck:
      return v1::MESSAGE_TYPE_REGISTER_ACK;
    case E::kHeartbeat:
      return v1::MESSAGE_TYPE_HEARTBEAT;
    case E::kLaunchPlan:
      return v1::MESSAGE_TYPE_LAUNCH_PLAN;
    case E::kStopWorkers:
      return v1::MESSAGE_TYPE_STOP_WORKERS;
    case E::kWorkerEvent:
      return v1::MESSAGE_TYPE_WORKER_EVENT;
    case E::kLogRead:
      return v1::MESSAGE_TYPE_LOG_READ;
    case E::kLogChunk:
      return v1::MESSAGE_TYPE_LOG_CHUNK;
    case E::kOperatorRequest:
      return v1::MESSAGE_TYPE_OPERATOR_REQUEST;
    case E::kOperatorResponse:
      return v1::MESSAGE_TYPE_OPERATOR_RESPONSE;
    case E::kExecRequest:
      return v1::MESSAGE_TYPE_EXEC_REQUEST;
    case E::kExecStart:
      return v1::MESSAGE_TYPE_EXEC_START;
    case E::kExecOutput:
      return v1::MESSAGE_TYPE_EXEC_OUTPUT;
    case E::kExecExited:
      return v1::MESSAGE_TYPE_EXEC_EXITED;
    case E::kExecCancel:
      return v1::MESSAGE_TYPE_EXEC_CANCEL;
    case E::kExecKeepalive:
      return v1::MESSAGE_TYPE_EXEC_KEEPALIVE;
    case E::kHeartbeatAck:
      return v1::MESSAGE_TYPE_HEARTBEAT_ACK;
    case E::kReservePorts:
      return v1::MESSAGE_TYPE_RESERVE_PORTS;
    case E::kPortsReserved:
      return v1::MESSAGE_TYPE_PORTS_RESERVED;
    case E::kRendezvousRequest:
      return v1::MESSAGE_TYPE_RENDEZVOUS_REQUEST;
    case E::kRendezvousReply:
      return v1::MESSAGE_TYPE_RENDEZVOUS_REPLY;
    case E::kFenceContribute:
      return v1::MESSAGE_TYPE_FENCE_CONTRIBUTE;
    case E::kFenceResult:
      return v1::MESSAGE_TYPE_FENCE_RESULT;
    case E::kProgressReport:
      return v1::MESSAGE_TYPE_PROGRESS_REPORT;
    case E::kPurgeJob:
      return v1::MESSAGE_TYPE_PURGE_JOB;
    case E::kRendezvousPublish:
      return v1::MESSAGE_TYPE_RENDEZVOUS_PUBLISH;
    case E::BODY_NOT_SET:
      break;
  }
  return v1::MESSAGE_TYPE_UNSPECIFIED;
}

std::optional<DecodeError> DecodeEnvelope(const void* data, size_t size, v1::Envelope& out) {
  if (size > kMaxMessageBytes) {
    return DecodeError{DropReason::kTooLarge, "message of " + std::to_string(size) +
                                                  " bytes exceeds the cap of " +
                                                  std::to_string(kMaxMessageBytes)};
  }
  out.Clear();
  if (!out.ParseFromArray(data, static_cast<int>(size))) {
    return DecodeError{DropReason::kMalformed, "not a trainlet.v1.Envelope"};
  }
  if (out.version() != kProtocolVersion) {
    return DecodeError{DropReason::kBadVersion, "protocol version " +
                                                    std::to_string(out.version()) + ", expected " +
                                                    std::to_string(kProtocolVersion)};
  }
  const v1::MessageType want = TypeForBody(out.body_case());
  if (out.type() == v1::MESSAGE_TYPE_UNSPECIFIED || want == v1::MESSAGE_TYPE_UNSPECIFIED ||
      out.type() != want) {
    return DecodeError{DropReason::kTypeMismatch,
                       "type " + std::to_string(out.type()) + " does not match the body"};
  }
  return std::nullopt;
}

std::string EncodeEnvelope(v1::Envelope& envelope) {
  const v1::MessageType type = TypeForBody(envelope.body_case());
  TRAINLET_CHECK_MSG(type != v1::MESSAGE_TYPE_UNSPECIFIED, "envelope without a body");
  envelope.set_version(kProtocolVersion);
  envelope.set_type(type);
  std::string out;
  envelope.SerializeToString(&out);
  return out;
}

}  // namespace trainlet
