// The words both ends of the rendezvous use when a rank's exit fails a fence, so a rank reads the
// same reason whether its own agent or the coordinator noticed first.
#pragma once

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

}  // namespace trainlet::rendezvous
