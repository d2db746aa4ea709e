#include "common/systemd_notify.h"

#ifdef TRAINLET_HAVE_SYSTEMD
#include <systemd/sd-daemon.h>
#endif

namespace trainlet {
namespace {

#ifdef TRAINLET_HAVE_SYSTEMD
class SdNotifier : public ServiceNotifier {
 public:
  void Notify(const std::string& state) override { sd_notify(0, state.c_str()); }
  std::chrono::microseconds WatchdogTimeout() const override {
    uint64_t usec = 0;
    // > 0 only when WATCHDOG_USEC is set and WATCHDOG_PID, if set, names this process.
    if (sd_watchdog_enabled(0, &usec) <= 0) return std::chrono::microseconds(0);
    return std::chrono::microseconds(usec);
  }
};
#endif

class NoNotifier : public ServiceNotifier {
 public:
  void Notify(const std::string&) override {}
  std::chrono::microseconds WatchdogTimeout() const override {
    return std::chrono::microseconds(0);
  }
};

}  // namespace

std::unique_ptr<ServiceNotifier> MakeSystemdNotifier() {
#ifdef TRAINLET_HAVE_SYSTEMD
  return std::make_unique<SdNotifier>();
#else
  return std::make_unique<NoNotifier>();
#endif
}

}  // namespace trainlet
