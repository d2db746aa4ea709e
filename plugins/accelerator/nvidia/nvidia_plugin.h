// The NVIDIA accelerator plugin: GPUs from hwloc's PCI devices (vendor 0x10de) and sysfs, with
// UUID, model, memory and health from NVML when libnvidia-ml.so.1 loads (see nvml_library.h).
//
// Indexes follow PCI bus order, which is NVML's order and CUDA's with CUDA_DEVICE_ORDER=PCI_BUS_ID;
// VisibleDevicesEnv sets that order, because CUDA's default ("fastest first") may differ.
// Health: "ok" when NVML knows the device and nothing is wrong; "unhealthy: XID <n>" after a
// fatal XID event (sticky); "unhealthy: <n> double-bit ECC errors"; "unknown" without NVML.
#pragma once

#include <memory>

#include "trainlet/accelerator_plugin.h"

namespace trainlet {

std::unique_ptr<AcceleratorPlugin> MakeNvidiaAcceleratorPlugin();

}  // namespace trainlet
