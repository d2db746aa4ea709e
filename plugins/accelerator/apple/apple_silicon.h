// Apple Silicon facts from the text of `sysctl` and `ioreg -rc AGXAccelerator`. The parsers are
// pure (tested on Linux from captured outputs in tests/fixtures/macos/); the Darwin calls that
// produce the same text are in apple_darwin.cpp and compile only on macOS.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace trainlet::accelerator {

struct AppleSysctl {
  std::string brand;               // machdep.cpu.brand_string, e.g. "Apple M2 Ultra"
  uint32_t performance_cores = 0;  // hw.perflevel0.physicalcpu
  uint32_t efficiency_cores = 0;   // hw.perflevel1.physicalcpu (0 on a chip without E-cores)
  uint64_t memory_bytes = 0;       // hw.memsize: unified memory, bytes
};

struct AppleGpu {
  std::string model;          // "model" of the AGXAccelerator, e.g. "Apple M2 Ultra"
  uint32_t gpu_cores = 0;     // "gpu-core-count"
  uint32_t accelerators = 0;  // AGXAccelerator objects listed (1 on every Apple Silicon Mac)
};

// Reads `sysctl` output lines "name: value" (also "name = value", as `sysctl -a` prints some
// keys). Unknown names are skipped, so `sysctl -a` output parses too. Invalid (naming `source`
// and the key) when machdep.cpu.brand_string or hw.memsize is missing or a number is malformed.
Result<AppleSysctl> ParseAppleSysctl(std::string_view text, const std::string& source);

// Reads `ioreg -rc AGXAccelerator` output: the "+-o AGXAccelerator..." objects and their
// top-level "gpu-core-count" = N and "model" = "..." properties. Text with no accelerator parses
// to accelerators == 0. Invalid (naming `source`) when gpu-core-count is not a number.
Result<AppleGpu> ParseAppleIoreg(std::string_view text, const std::string& source);

// True for an Apple Silicon brand string ("Apple M1", "Apple M4 Pro"), false for an Intel Mac's.
bool IsAppleSilicon(const AppleSysctl& sysctl);

// macOS only: the outputs of `sysctl <the keys above>` and `ioreg -rc AGXAccelerator -d 1` for
// this Mac, in the formats the parsers read. Elsewhere: Unavailable.
Result<std::string> ReadDarwinSysctlText();
Result<std::string> ReadDarwinIoregText();

}  // namespace trainlet::accelerator
