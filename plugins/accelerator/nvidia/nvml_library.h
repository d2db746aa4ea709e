// NVML (libnvidia-ml.so.1) loaded at run time with dlopen, so trainlet neither builds against
// nvml.h nor needs the driver to run: the few types and functions used are declared here,
// following NVML's documented C ABI, and resolved by name with dlsym.
//
// Threading: one instance is used by one thread at a time (NVML itself is thread-safe, the event
// set bookkeeping here is not).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"

namespace trainlet::accelerator {

// What NVML says about one device.
struct NvmlDeviceInfo {
  std::string uuid;           // "GPU-..."
  std::string name;           // "NVIDIA H100 80GB HBM3"
  uint64_t memory_bytes = 0;  // total framebuffer memory
};

// XIDs the NVIDIA device plugin and DCGM treat as the device's fault rather than the
// application's: uncorrectable ECC (48, 63/64 row remapping failure, 94/95 contained and
// uncontained errors), the GPU falling off the bus (79), internal microcontroller halts (61, 62),
// NVLink errors (74), GSP errors (119, 120), and more. Application errors (13, 31, 43, 45, 68,
// 109) are not in it.
bool IsFatalXid(uint64_t xid);

class NvmlLibrary {
 public:
  // Loads `library` (a soname or a path) and calls nvmlInit_v2. Unavailable when the library is
  // absent or lacks a symbol, Internal when nvmlInit fails; the message says which.
  static Result<std::unique_ptr<NvmlLibrary>> Open(const std::string& library);
  ~NvmlLibrary();  // nvmlShutdown, dlclose
  NvmlLibrary(const NvmlLibrary&) = delete;
  NvmlLibrary& operator=(const NvmlLibrary&) = delete;

  // The device at `pci_bus_id` ("0000:18:00.0"): NotFound when NVML does not know it.
  Result<NvmlDeviceInfo> Describe(const std::string& pci_bus_id);

  // Starts watching the devices' critical XID events (an event set); devices NVML does not know
  // or that do not support events are skipped. Call once, after which PollFatalXids sees events.
  void WatchXids(const std::vector<std::string>& pci_bus_ids);
  // Drains pending events without waiting (timeout 0): bus id -> the last fatal XID seen now.
  std::map<std::string, uint64_t> PollFatalXids();
  // Volatile (since driver load) uncorrected, i.e. double-bit, ECC errors of the device; 0 when
  // ECC is off or unsupported, or the device is unknown.
  uint64_t DoubleBitEccErrors(const std::string& pci_bus_id);

 private:
  struct Api;
  explicit NvmlLibrary(void* handle, std::unique_ptr<Api> api);
  void* DeviceOf(const std::string& pci_bus_id);

  void* handle_ = nullptr;  // dlopen handle, owned
  std::unique_ptr<Api> api_;
  void* event_set_ = nullptr;             // nvmlEventSet_t, owned when non-null
  std::map<void*, std::string> watched_;  // nvmlDevice_t -> bus id
};

}  // namespace trainlet::accelerator
