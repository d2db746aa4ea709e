// The stop and warning requests of a step: small files the agent writes into the step's
// directory before it signals the step, so that the step, not the agent, owns what they start.
//
//  - <dir>/stop, then SIGTERM: stop the ranks with a warning first (preemption, drain --force).
//    The step sends `warning_signal` to every rank's process group, waits up to
//    `warning_grace_ms` (ranks that exit in it are done), then SIGTERM, then SIGKILL after the
//    launch file's stop grace. An agent killed or restarted during the grace loses none of it.
//    A SIGTERM with no stop file (or one whose warning_signal is 0) is today's plain stop.
//  - <dir>/warn, then SIGUSR2: send `warning_signal` to every rank's process group and stop
//    nothing (the warning before a job's activeDeadlineSeconds). warning_grace_ms is unused.
//
// Written whole through ReplaceFile (private_file.h), so the step reads the old request or the
// new one. Pure data and file I/O; safe from any thread.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"

namespace trainlet::step {

struct StopRequest {
  int warning_signal = 0;         // 0: none
  uint32_t warning_grace_ms = 0;  // warning_signal to SIGTERM
  // The agent's wall clock when it wrote the request: a restarted agent that adopts the step
  // estimates from it when the warning ends (it must not cut the grace short).
  int64_t sent_unix_ms = 0;
};

std::string EncodeStopRequest(const StopRequest& request);
// Errors (Invalid) name the field at fault; a signal outside 0..64 is refused.
Result<StopRequest> DecodeStopRequest(const std::string& text);
// Errors name the path: NotFound when missing, Io when unreadable, Invalid when malformed.
Status WriteStopRequest(const std::string& path, const StopRequest& request);
Result<StopRequest> ReadStopRequest(const std::string& path);

}  // namespace trainlet::step
