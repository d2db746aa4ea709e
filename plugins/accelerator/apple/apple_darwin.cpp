// The Darwin half of the Apple plugin: asks this Mac, and prints what it says in the formats
// apple_silicon.cpp parses, so one parser serves the live Mac and the captured fixtures.
#include "plugins/accelerator/apple/apple_silicon.h"

#if defined(__APPLE__)
#include <sys/sysctl.h>
#include <sys/types.h>

#include <cstdio>
#endif

namespace trainlet::accelerator {

#if defined(__APPLE__)

namespace {

bool SysctlString(const char* name, std::string* out) {
  size_t size = 0;
  if (sysctlbyname(name, nullptr, &size, nullptr, 0) != 0 || size == 0) return false;
  std::string value(size, '\0');
  if (sysctlbyname(name, value.data(), &size, nullptr, 0) != 0) return false;
  value.resize(size > 0 && value[size - 1] == '\0' ? size - 1 : size);
  *out = value;
  return true;
}

template <typename T>
bool SysctlNumber(const char* name, T* out) {
  size_t size = sizeof(T);
  return sysctlbyname(name, out, &size, nullptr, 0) == 0 && size == sizeof(T);
}

}  // namespace

Result<std::string> ReadDarwinSysctlText() {
  std::string text, brand;
  if (SysctlString("machdep.cpu.brand_string", &brand)) {
    text += "machdep.cpu.brand_string: " + brand + "\n";
  }
  uint64_t memsize = 0;
  if (SysctlNumber("hw.memsize", &memsize)) text += "hw.memsize: " + std::to_string(memsize) + "\n";
  for (const char* key : {"hw.perflevel0.physicalcpu", "hw.perflevel1.physicalcpu"}) {
    int32_t n = 0;
    if (SysctlNumber(key, &n)) text += std::string(key) + ": " + std::to_string(n) + "\n";
  }
  if (text.empty()) return UnavailableError("sysctl: no answer for machdep.cpu.brand_string");
  return text;
}

Result<std::string> ReadDarwinIoregText() {
  // ioreg prints the IOKit registry entries of class AGXAccelerator with their properties; run
  // once at agent start, so a child process here costs nothing that matters.
  FILE* pipe = popen("/usr/sbin/ioreg -rc AGXAccelerator -d 1", "r");
  if (pipe == nullptr) return UnavailableError("ioreg: cannot run /usr/sbin/ioreg");
  std::string text;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) text.append(buf, n);
  if (pclose(pipe) != 0 && text.empty()) return UnavailableError("ioreg -rc AGXAccelerator failed");
  return text;
}

#else

Result<std::string> ReadDarwinSysctlText() { return UnavailableError("sysctl: not macOS"); }
Result<std::string> ReadDarwinIoregText() { return UnavailableError("ioreg: not macOS"); }

#endif

}  // namespace trainlet::accelerator
