#include "plugins/accelerator/nvidia/nvml_library.h"

#include <dlfcn.h>

#include <algorithm>
#include <array>

namespace trainlet::accelerator {
namespace {

// NVML's C ABI, as documented in NVML's API reference (nvml.h is not included on purpose).
using nvmlReturn_t = int;
using nvmlDevice_t = void*;
using nvmlEventSet_t = void*;
constexpr nvmlReturn_t kNvmlSuccess = 0;
constexpr unsigned long long kNvmlEventTypeXidCriticalError = 0x8ULL;
constexpr int kNvmlMemoryErrorTypeUncorrected = 1;
constexpr int kNvmlVolatileEcc = 0;
constexpr unsigned kNvmlUuidLength = 96;
constexpr unsigned kNvmlNameLength = 96;

struct nvmlMemory_t {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};

struct nvmlEventData_t {
  nvmlDevice_t device;
  unsigned long long eventType;
  unsigned long long eventData;  // the XID for XID events
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
};

constexpr std::array<uint64_t, 15> kFatalXids = {48, 61, 62, 63,  64,  69,  74, 79,
                                                 92, 94, 95, 119, 120, 140, 143};

}  // namespace

struct NvmlLibrary::Api {
  nvmlReturn_t (*init)();
  nvmlReturn_t (*shutdown)();
  const char* (*error_string)(nvmlReturn_t);
  nvmlReturn_t (*handle_by_bus_id)(const char*, nvmlDevice_t*);
  nvmlReturn_t (*get_uuid)(nvmlDevice_t, char*, unsigned);
  nvmlReturn_t (*get_name)(nvmlDevice_t, char*, unsigned);
  nvmlReturn_t (*get_memory)(nvmlDevice_t, nvmlMemory_t*);
  nvmlReturn_t (*total_ecc)(nvmlDevice_t, int, int, unsigned long long*);
  nvmlReturn_t (*event_set_create)(nvmlEventSet_t*);
  nvmlReturn_t (*register_events)(nvmlDevice_t, unsigned long long, nvmlEventSet_t);
  nvmlReturn_t (*event_set_wait)(nvmlEventSet_t, nvmlEventData_t*, unsigned);
  nvmlReturn_t (*event_set_free)(nvmlEventSet_t);
};

bool IsFatalXid(uint64_t xid) {
  return std::find(kFatalXids.begin(), kFatalXids.end(), xid) != kFatalXids.end();
}

Result<std::unique_ptr<NvmlLibrary>> NvmlLibrary::Open(const std::string& library) {
  if (library.empty()) return UnavailableError("NVML: disabled");
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return UnavailableError("NVML: cannot load " + library + ": " + (why ? why : "?"));
  }
  auto api = std::make_unique<Api>();
  std::string missing;
  auto bind = [&](auto& fn, const char* symbol) {
    void* p = dlsym(handle, symbol);
    if (p == nullptr) missing += (missing.empty() ? "" : ", ") + std::string(symbol);
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(p);
  };
  bind(api->init, "nvmlInit_v2");
  bind(api->shutdown, "nvmlShutdown");
  bind(api->error_string, "nvmlErrorString");
  bind(api->handle_by_bus_id, "nvmlDeviceGetHandleByPciBusId_v2");
  bind(api->get_uuid, "nvmlDeviceGetUUID");
  bind(api->get_name, "nvmlDeviceGetName");
  bind(api->get_memory, "nvmlDeviceGetMemoryInfo");
  bind(api->total_ecc, "nvmlDeviceGetTotalEccErrors");
  bind(api->event_set_create, "nvmlEventSetCreate");
  bind(api->register_events, "nvmlDeviceRegisterEvents");
  bind(api->event_set_wait, "nvmlEventSetWait_v2");
  bind(api->event_set_free, "nvmlEventSetFree");
  if (!missing.empty()) {
    dlclose(handle);
    return UnavailableError("NVML: " + library + " lacks " + missing);
  }
  if (nvmlReturn_t rc = api->init(); rc != kNvmlSuccess) {
    // The message text lives in the library: copy it before dlclose unmaps it.
    const char* why = api->error_string(rc);
    Status failed = InternalError("NVML: nvmlInit_v2 failed: " + std::string(why ? why : "?") +
                                  " (" + std::to_string(rc) + ")");
    dlclose(handle);
    return failed;
  }
  return std::unique_ptr<NvmlLibrary>(new NvmlLibrary(handle, std::move(api)));
}

NvmlLibrary::NvmlLibrary(void* handle, std::unique_ptr<Api> api)
    : handle_(handle), api_(std::move(api)) {}

NvmlLibrary::~NvmlLibrary() {
  if (event_set_ != nullptr) api_->event_set_free(event_set_);
  api_->shutdown();
  dlclose(handle_);
}

void* NvmlLibrary::DeviceOf(const std::string& pci_bus_id) {
  nvmlDevice_t device = nullptr;
  if (api_->handle_by_bus_id(pci_bus_id.c_str(), &device) != kNvmlSuccess) return nullptr;
  return device;
}

Result<NvmlDeviceInfo> NvmlLibrary::Describe(const std::string& pci_bus_id) {
  nvmlDevice_t device = DeviceOf(pci_bus_id);
  if (device == nullptr) return NotFoundError("NVML: no device at " + pci_bus_id);
  NvmlDeviceInfo info;
  char buf[kNvmlUuidLength > kNvmlNameLength ? kNvmlUuidLength : kNvmlNameLength] = {0};
  if (api_->get_uuid(device, buf, kNvmlUuidLength) == kNvmlSuccess) info.uuid = buf;
  buf[0] = '\0';
  if (api_->get_name(device, buf, kNvmlNameLength) == kNvmlSuccess) info.name = buf;
  nvmlMemory_t memory{};
  if (api_->get_memory(device, &memory) == kNvmlSuccess) info.memory_bytes = memory.total;
  return info;
}

void NvmlLibrary::WatchXids(const std::vector<std::string>& pci_bus_ids) {
  if (event_set_ == nullptr && api_->event_set_create(&event_set_) != kNvmlSuccess) {
    event_set_ = nullptr;
    return;
  }
  for (const std::string& bus_id : pci_bus_ids) {
    nvmlDevice_t device = DeviceOf(bus_id);
    if (device == nullptr || watched_.contains(device)) continue;
    if (api_->register_events(device, kNvmlEventTypeXidCriticalError, event_set_) == kNvmlSuccess) {
      watched_[device] = bus_id;
    }
  }
}

std::map<std::string, uint64_t> NvmlLibrary::PollFatalXids() {
  std::map<std::string, uint64_t> fatal;
  if (event_set_ == nullptr) return fatal;
  // Bounded: a device storming events must not keep the caller here.
  for (int i = 0; i < 256; ++i) {
    nvmlEventData_t data{};
    if (api_->event_set_wait(event_set_, &data, 0) != kNvmlSuccess) break;  // timeout: none left
    if (data.eventType != kNvmlEventTypeXidCriticalError || !IsFatalXid(data.eventData)) continue;
    auto it = watched_.find(data.device);
    if (it != watched_.end()) fatal[it->second] = data.eventData;
  }
  return fatal;
}

uint64_t NvmlLibrary::DoubleBitEccErrors(const std::string& pci_bus_id) {
  nvmlDevice_t device = DeviceOf(pci_bus_id);
  unsigned long long count = 0;
  if (device == nullptr || api_->total_ecc(device, kNvmlMemoryErrorTypeUncorrected,
                                           kNvmlVolatileEcc, &count) != kNvmlSuccess) {
    return 0;
  }
  return count;
}

}  // namespace trainlet::accelerator
