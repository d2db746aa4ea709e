// The words both ends of the rendezvous use when a rank's exit fails a fence, so a rank reads the
// same reason whether its own agent or the coordinator noticed first.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace trainlet::rendezvous {

// "rank 5 on node-b exited with signal 9 before joining fence 2"; `how` is "exited with ...".
inline std::string FenceAbortMessage(uint32_t rank, const std::string& node, const std::string& how,
                                     uint64_t epoch) {
  return "rank " + std::to_string(rank) + " on " + node + " " + how + " before joining fence " +
         std::to_string(epoch);
}

// "exited with code 3" / "exited with signal 9".
inline std::string DescribeRankExit(int exit_code, int signal) {
  return signal != 0 ? "exited with signal " + std::to_string(signal)
                     : "exited with code " + std::to_string(exit_code);
}

// A rank's PMIx_Abort message as it may travel in a protobuf string: at most
// kMaxMpiAbortMessage bytes, printable ASCII (line breaks and other control bytes become spaces,
// bytes outside ASCII '?'), trailing spaces dropped.
inline constexpr size_t kMaxMpiAbortMessage = 1024;
inline std::string CleanMpiAbortMessage(std::string message) {
  if (message.size() > kMaxMpiAbortMessage) message.resize(kMaxMpiAbortMessage);
  for (char& c : message) {
    const auto b = static_cast<unsigned char>(c);
    if (b < 0x20 || b == 0x7f) c = ' ';
    if (b >= 0x80) c = '?';
  }
  while (!message.empty() && message.back() == ' ') message.pop_back();
  return message;
}

// "rank 3 on node-b called MPI_Abort (errorcode 7): <message>": a rank that called PMIx_Abort,
// as its agent aborts the node's fences and the coordinator names the attempt's cause.
inline std::string MpiAbortCause(uint32_t rank, const std::string& node, int errorcode,
                                 const std::string& message) {
  const std::string clean = CleanMpiAbortMessage(message);
  return "rank " + std::to_string(rank) + " on " + node + " called MPI_Abort (errorcode " +
         std::to_string(errorcode) + ")" + (clean.empty() ? "" : ": " + clean);
}

}  // namespace trainlet::rendezvous
