// The Apple accelerator plugin: an Apple Silicon SoC's GPU as one accelerator (its memory is the
// unified memory), with the chip name, P/E core counts and GPU core count (apple_silicon.h).
// Health is "unknown" (macOS offers no GPU health interface). Its devices cannot be split between
// processes, so VisibleDevicesEnv is empty and apple.com/gpu is 1 per Mac.
#pragma once

#include <memory>

#include "trainlet/accelerator_plugin.h"

namespace trainlet {

std::unique_ptr<AcceleratorPlugin> MakeAppleAcceleratorPlugin();

}  // namespace trainlet
