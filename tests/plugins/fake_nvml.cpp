// A stand-in for libnvidia-ml.so.1 with the few entry points the nvidia plugin resolves, so the
// NVML path (UUID, name, memory, XID events, ECC) is tested without a GPU. Its devices and faults
// come from the environment, read at nvmlInit_v2:
//   FAKE_NVML_DEVICES  comma-separated PCI bus ids NVML knows, index = position
//   FAKE_NVML_XID      "<index>:<xid>": one XID event for that device, delivered once
//   FAKE_NVML_DBE      "<index>:<count>": volatile uncorrected ECC errors of that device
//   FAKE_NVML_INIT_FAILS  set: nvmlInit_v2 returns NVML_ERROR_DRIVER_NOT_LOADED (9)
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

struct Device {
  std::string bus_id;
};
std::vector<Device> g_devices;
int g_xid_index = -1;
unsigned long long g_xid = 0;
int g_dbe_index = -1;
unsigned long long g_dbe = 0;
bool g_event_set = false;

struct EventData {
  void* device;
  unsigned long long type;
  unsigned long long data;
  unsigned gi, ci;
};

void* Handle(size_t i) { return reinterpret_cast<void*>(i + 1); }
long IndexOf(void* device) {
  const long i = static_cast<long>(reinterpret_cast<size_t>(device)) - 1;
  return i >= 0 && i < static_cast<long>(g_devices.size()) ? i : -1;
}
void ReadPair(const char* name, int* index, unsigned long long* value) {
  const char* v = std::getenv(name);
  if (v != nullptr) std::sscanf(v, "%d:%llu", index, value);
}

}  // namespace

extern "C" {

int nvmlInit_v2() {
  if (std::getenv("FAKE_NVML_INIT_FAILS") != nullptr) return 9;
  g_devices.clear();
  if (const char* list = std::getenv("FAKE_NVML_DEVICES")) {
    std::string s = list;
    size_t start = 0;
    while (start <= s.size()) {
      size_t comma = s.find(',', start);
      if (comma == std::string::npos) comma = s.size();
      if (comma > start) g_devices.push_back({s.substr(start, comma - start)});
      start = comma + 1;
    }
  }
  g_xid_index = g_dbe_index = -1;
  ReadPair("FAKE_NVML_XID", &g_xid_index, &g_xid);
  ReadPair("FAKE_NVML_DBE", &g_dbe_index, &g_dbe);
  return 0;
}
int nvmlShutdown() { return 0; }
const char* nvmlErrorString(int rc) { return rc == 9 ? "Driver Not Loaded" : "fake error"; }

int nvmlDeviceGetHandleByPciBusId_v2(const char* bus_id, void** device) {
  for (size_t i = 0; i < g_devices.size(); ++i) {
    if (strcasecmp(g_devices[i].bus_id.c_str(), bus_id) == 0) {
      *device = Handle(i);
      return 0;
    }
  }
  return 6;  // NVML_ERROR_NOT_FOUND
}
int nvmlDeviceGetUUID(void* device, char* out, unsigned len) {
  long i = IndexOf(device);
  if (i < 0) return 2;
  std::snprintf(out, len, "GPU-fake-%02ld", i);
  return 0;
}
int nvmlDeviceGetName(void* device, char* out, unsigned len) {
  if (IndexOf(device) < 0) return 2;
  std::snprintf(out, len, "NVIDIA H100 80GB HBM3");
  return 0;
}
int nvmlDeviceGetMemoryInfo(void* device, unsigned long long* memory) {
  if (IndexOf(device) < 0) return 2;
  memory[0] = 85520809984ULL;  // total
  memory[1] = memory[0];
  memory[2] = 0;
  return 0;
}
int nvmlDeviceGetTotalEccErrors(void* device, int type, int counter, unsigned long long* count) {
  long i = IndexOf(device);
  if (i < 0) return 2;
  *count = (type == 1 && counter == 0 && i == g_dbe_index) ? g_dbe : 0;
  return 0;
}
int nvmlEventSetCreate(void** set) {
  *set = &g_event_set;
  return 0;
}
int nvmlDeviceRegisterEvents(void* device, unsigned long long types, void* set) {
  return IndexOf(device) >= 0 && set == &g_event_set && (types & 0x8) ? 0 : 2;
}
int nvmlEventSetWait_v2(void* set, EventData* data, unsigned timeout_ms) {
  if (g_xid_index >= 0 && g_xid_index < static_cast<int>(g_devices.size())) {
    data->device = Handle(static_cast<size_t>(g_xid_index));
    data->type = 0x8;
    data->data = g_xid;
    g_xid_index = -1;  // delivered once
    return 0;
  }
  return 10;  // NVML_ERROR_TIMEOUT
}
int nvmlEventSetFree(void*) { return 0; }

}  // extern "C"
