// libsystemd, loaded the first time it is needed rather than linked.
//
// The daemons use two of its calls: sd_journal_sendv, when their stderr is the journal, and
// sd_watchdog_enabled, when systemd set a watchdog. Both happen only under systemd. Anywhere else
// (a Kubernetes pod, launchd, a shell, a test cluster) libsystemd and the six libraries it brings
// (libgcrypt, libgpg-error, liblzma, libzstd, liblz4, libcap) were mapped for nothing: about
// 0.9 MiB of the agent's idle RSS (bench/README.md).
//
// Threading: LoadSystemdLibrary may be called from any thread; the first call loads.
#pragma once

#include <sys/uio.h>

#include <cstdint>
#include <string>

namespace trainlet {

struct SystemdLibrary {
  int (*journal_sendv)(const struct iovec* iov, int n);
  int (*watchdog_enabled)(int unset_environment, uint64_t* usec);
};

// libsystemd.so.0's entry points, or null when it cannot be loaded (not installed, or a system
// without it such as macOS); `why` then says what failed. The library stays loaded.
const SystemdLibrary* LoadSystemdLibrary(std::string* why = nullptr);

}  // namespace trainlet
