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
  virtual void Notify(const std::string& state) = 0;
  // The watchdog timeout the service manager set for this process (WATCHDOG_USEC, honouring
  // WATCHDOG_PID), or zero when there is no watchdog.
  virtual std::chrono::microseconds WatchdogTimeout() const = 0;
};

// libsystemd's sd_notify where trainlet was built with it; otherwise (macOS) a no-op notifier.
std::unique_ptr<ServiceNotifier> MakeSystemdNotifier();

}  // namespace trainlet
