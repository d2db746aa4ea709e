#include "common/systemd_notify.h"

#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "common/platform/descriptors.h"
#include "common/systemd_library.h"

namespace trainlet {
namespace {

class SocketNotifier : public ServiceNotifier {
 public:
  SocketNotifier() {
    const char* path = std::getenv("NOTIFY_SOCKET");
    if (path == nullptr || path[0] == '\0' || std::strlen(path) >= sizeof addr_.sun_path) return;
    if (path[0] != '/' && path[0] != '@') return;  // not a socket sd_notify(3) would use
    addr_.sun_family = AF_UNIX;
    std::memcpy(addr_.sun_path, path, std::strlen(path));
    addr_len_ = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + std::strlen(path));
    if (path[0] == '@') addr_.sun_path[0] = '\0';  // abstract namespace
    fd_ = platform::OpenSocket(AF_UNIX, SOCK_DGRAM, 0);
    // Even READY=1 waits for a stuck service manager only this long.
    timeval timeout{2, 0};
    if (fd_ >= 0) setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
  }
  ~SocketNotifier() override {
    if (fd_ >= 0) close(fd_);
  }

  void Notify(const std::string& state, bool may_drop) override {
    if (fd_ < 0) return;
    platform::SendToNoSignal(fd_, state.data(), state.size(), may_drop ? MSG_DONTWAIT : 0,
                             reinterpret_cast<const sockaddr*>(&addr_), addr_len_);
  }

  std::chrono::microseconds WatchdogTimeout() const override {
    const char* us = std::getenv("WATCHDOG_USEC");
    if (us == nullptr) return std::chrono::microseconds(0);  // no watchdog: libsystemd not loaded
    uint64_t usec = 0;
    if (const SystemdLibrary* systemd = LoadSystemdLibrary()) {
      // > 0 only when WATCHDOG_USEC is valid and WATCHDOG_PID, if set, names this process.
      if (systemd->watchdog_enabled(0, &usec) <= 0) return std::chrono::microseconds(0);
    } else {
      const char* pid = std::getenv("WATCHDOG_PID");
      if (pid != nullptr && std::atol(pid) != static_cast<long>(getpid())) {
        return std::chrono::microseconds(0);
      }
      usec = std::strtoull(us, nullptr, 10);
    }
    return std::chrono::microseconds(static_cast<int64_t>(usec));
  }

 private:
  int fd_ = -1;
  sockaddr_un addr_{};
  socklen_t addr_len_ = 0;
};

}  // namespace

std::unique_ptr<ServiceNotifier> MakeSystemdNotifier() {
  return std::make_unique<SocketNotifier>();
}

}  // namespace trainlet
