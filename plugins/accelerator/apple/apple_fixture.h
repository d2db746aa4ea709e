// A testing aid: a Linux agent that impersonates an Apple Silicon Mac from captured `sysctl` and
// `ioreg -rc AGXAccelerator` outputs (tests/fixtures/macos/), the way --topology-xml impersonates
// another Linux server. The Apple plugin then parses the captures instead of asking Darwin, and
// the node reports the Mac's chip, GPU cores, P/E cores and unified memory.
//
// Pure functions over files named by the caller; any thread may call them.
#pragma once

#include <string>

#include "common/status.h"
#include "plugins/accelerator/apple/apple_silicon.h"
#include "trainlet/accelerator_plugin.h"
#include "trainlet/v1/node.pb.h"

namespace trainlet::accelerator {

struct AppleFixture {
  std::string prefix;       // as given, e.g. "tests/fixtures/macos/m2-ultra"
  std::string sysctl_text;  // <prefix>-sysctl.txt
  std::string ioreg_text;   // <prefix>-ioreg.txt
  AppleSysctl chip;         // sysctl_text parsed
};

// Reads <prefix>-sysctl.txt and <prefix>-ioreg.txt. NotFound/Io naming the file when one cannot
// be read; Invalid (naming the file) when the sysctl capture lacks the brand or memory size, a
// number is malformed, or the brand is not an Apple Silicon chip.
Result<AppleFixture> LoadAppleFixture(const std::string& prefix);

// Points `env` at the captures: the Apple plugin parses them, and the live sources (sysfs, NVML,
// Darwin calls) are off, since they describe this machine rather than the Mac.
void UseAppleFixture(const AppleFixture& fixture, AcceleratorEnv* env);

// The Mac's topology as hwloc on macOS shows an Apple Silicon machine: one package and one NUMA
// node holding every core (P-cores first, no SMT, so cores == PUs), the unified memory, the chip
// name as cpu_model, no PCI GPUs or NICs; source "apple-fixture:<prefix>".
v1::Topology AppleFixtureTopology(const AppleFixture& fixture);

}  // namespace trainlet::accelerator
