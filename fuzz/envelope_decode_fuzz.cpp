// libFuzzer target for the one parser every peer can reach: DecodeEnvelope.
//
// Any bytes must decode or be rejected without a crash, a sanitizer report or an unbounded
// allocation. Bytes that decode must survive a round trip: re-encoding the envelope and decoding
// the result gives an equal message, so what a daemon forwards means what it received. The
// envelope is the daemons' lite message; the comparison reflects over the descriptor set.
#include <google/protobuf/stubs/logging.h>
#include <google/protobuf/util/message_differencer.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "common/envelope.h"
#include "proto/reflection.h"

namespace {

[[noreturn]] void Fail(const char* what, const trainlet::v1::Envelope& first,
                       const trainlet::v1::Envelope& second) {
  std::fprintf(stderr, "round trip broken: %s\nfirst:\n%s\nsecond:\n%s\n", what,
               trainlet::proto::Reflect(first)->DebugString().c_str(),
               trainlet::proto::Reflect(second)->DebugString().c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  // protobuf logs every string field with bad UTF-8; at fuzzing speed that drowns the report.
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  trainlet::v1::Envelope decoded;
  if (auto err = trainlet::DecodeEnvelope(data, size, decoded)) {
    // Every rejection is classified: the daemons count drops by this name.
    if (err->reason >= trainlet::DropReason::kCount) std::abort();
    if (trainlet::DropReasonName(err->reason) == std::string("unknown")) std::abort();
    return 0;
  }

  trainlet::v1::Envelope copy = decoded;
  const std::string bytes = trainlet::EncodeEnvelope(copy);
  trainlet::v1::Envelope again;
  if (auto err = trainlet::DecodeEnvelope(bytes.data(), bytes.size(), again)) {
    Fail(err->detail.c_str(), decoded, again);
  }
  if (!google::protobuf::util::MessageDifferencer::Equals(*trainlet::proto::Reflect(decoded),
                                                          *trainlet::proto::Reflect(again))) {
    Fail("re-decoded envelope differs", decoded, again);
  }
  return 0;
}
