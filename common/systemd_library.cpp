#include "common/systemd_library.h"

#include <dlfcn.h>

#include <type_traits>

#ifdef TRAINLET_HAVE_SYSTEMD
#include <systemd/sd-daemon.h>
#include <systemd/sd-journal.h>
#endif

namespace trainlet {
namespace {

#ifdef TRAINLET_HAVE_SYSTEMD
// The pointers match the headers' declarations: a changed signature fails the build.
static_assert(std::is_same_v<decltype(&sd_journal_sendv), decltype(SystemdLibrary::journal_sendv)>);
static_assert(
    std::is_same_v<decltype(&sd_watchdog_enabled), decltype(SystemdLibrary::watchdog_enabled)>);
#endif

struct Loaded {
  SystemdLibrary library{};
  bool ok = false;
  std::string why;
};

Loaded Load() {
  Loaded l;
  void* handle = dlopen("libsystemd.so.0", RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* e = dlerror();
    l.why = e != nullptr ? e : "libsystemd.so.0: cannot be loaded";
    return l;
  }
  l.library.journal_sendv =
      reinterpret_cast<decltype(l.library.journal_sendv)>(dlsym(handle, "sd_journal_sendv"));
  l.library.watchdog_enabled =
      reinterpret_cast<decltype(l.library.watchdog_enabled)>(dlsym(handle, "sd_watchdog_enabled"));
  if (l.library.journal_sendv == nullptr || l.library.watchdog_enabled == nullptr) {
    l.why = "libsystemd.so.0 lacks sd_journal_sendv or sd_watchdog_enabled";
    dlclose(handle);
    return l;
  }
  l.ok = true;
  return l;
}

}  // namespace

const SystemdLibrary* LoadSystemdLibrary(std::string* why) {
  static const Loaded loaded = Load();  // thread-safe initialisation
  if (!loaded.ok) {
    if (why != nullptr) *why = loaded.why;
    return nullptr;
  }
  return &loaded.library;
}

}  // namespace trainlet
