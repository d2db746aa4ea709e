// The seam between the daemons and their service manager's readiness protocol (sd_notify(3)).
//
// Under systemd (Type=notify) the unit's NOTIFY_SOCKET is set and the daemons report READY=1,
// STATUS=..., WATCHDOG=1 and STOPPING=1 through it. Elsewhere (launchd, a shell, Kubernetes)
// NOTIFY_SOCKET is unset and every call is a no-op. Tests swap in a recording notifier, or run
// the real one against a datagram socket of their own.
//
// Threading: called from the daemon's loop only.
#pragma once

#include <chrono>
#include <memory>
#include <string>

namespace trainlet {

class ServiceNotifier {
 public:
  virtual ~ServiceNotifier() = default;
  // Sends one notification, e.g. "READY=1" or "STATUS=3 nodes Ready". Failures are ignored:
  // a service manager that cannot be told is not a reason to stop serving.
  // may_drop: when the service manager's queue is full, drop the message rather than wait.
  // WATCHDOG=1 and STATUS= pass true: the loop must never block on a busy service manager (the
  // next pet comes soon). READY=1 and STOPPING=1 pass false: they are sent once, and losing
  // READY=1 would make systemd fail the start.
  virtual void Notify(const std::string& state, bool may_drop = false) = 0;
  // The watchdog timeout the service manager set for this process (WATCHDOG_USEC, honouring
  // WATCHDOG_PID), or zero when there is no watchdog.
  virtual std::chrono::microseconds WatchdogTimeout() const = 0;
};

// The sd_notify(3) protocol: one datagram per notification to $NOTIFY_SOCKET (a path, or an
// abstract socket when it starts with '@'); a no-op when it is unset. It is written here rather
// than calling libsystemd's sd_notify because sd_notify always blocks on a full queue; the
// watchdog timeout still comes from libsystemd's sd_watchdog_enabled where it is available
// (loaded only when WATCHDOG_USEC is set: systemd_library.h).
std::unique_ptr<ServiceNotifier> MakeSystemdNotifier();

}  // namespace trainlet
