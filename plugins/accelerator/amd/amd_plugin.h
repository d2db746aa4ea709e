// The AMD accelerator plugin: GPUs from hwloc's PCI devices (vendor 0x1002) and the amdgpu
// driver's sysfs attributes on the PCI device (the same directory as
// /sys/class/drm/cardN/device): numa_node, local_cpulist, mem_info_vram_total, product_name,
// unique_id. Health is "unknown": there is no vendor library behind it (yet).
//
// Indexes follow PCI bus order. VisibleDevicesEnv sets ROCR_VISIBLE_DEVICES only: HIP applies
// HIP_VISIBLE_DEVICES to what ROCr already let through, so setting both to the same indexes
// would hide the devices from each other.
#pragma once

#include <memory>

#include "trainlet/accelerator_plugin.h"

namespace trainlet {

std::unique_ptr<AcceleratorPlugin> MakeAmdAcceleratorPlugin();

}  // namespace trainlet
