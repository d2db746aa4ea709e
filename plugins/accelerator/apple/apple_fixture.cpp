#include "plugins/accelerator/apple/apple_fixture.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace trainlet::accelerator {
namespace {

Result<std::string> ReadCapture(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int err = errno;
    std::string msg = "apple fixture " + path + ": cannot read: " + std::strerror(err);
    return err == ENOENT ? NotFoundError(std::move(msg)) : IoError(std::move(msg));
  }
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

Result<AppleFixture> LoadAppleFixture(const std::string& prefix) {
  AppleFixture f;
  f.prefix = prefix;
  const std::string sysctl_path = prefix + "-sysctl.txt", ioreg_path = prefix + "-ioreg.txt";
  TRAINLET_ASSIGN_OR_RETURN(f.sysctl_text, ReadCapture(sysctl_path));
  TRAINLET_ASSIGN_OR_RETURN(f.ioreg_text, ReadCapture(ioreg_path));
  TRAINLET_ASSIGN_OR_RETURN(f.chip, ParseAppleSysctl(f.sysctl_text, sysctl_path));
  if (!IsAppleSilicon(f.chip)) {
    return InvalidError(sysctl_path + ": machdep.cpu.brand_string \"" + f.chip.brand +
                        "\" is not an Apple Silicon chip");
  }
  // Parsed here too, so a broken capture stops the agent at start with the file's name rather
  // than leaving a Mac without its GPU.
  TRAINLET_ASSIGN_OR_RETURN(AppleGpu gpu, ParseAppleIoreg(f.ioreg_text, ioreg_path));
  if (gpu.accelerators == 0) return InvalidError(ioreg_path + ": no AGXAccelerator object");
  return f;
}

void UseAppleFixture(const AppleFixture& fixture, AcceleratorEnv* env) {
  env->sysfs_root.clear();
  env->nvml_library.clear();
  env->apple_live = false;
  env->apple_sysctl_text = fixture.sysctl_text;
  env->apple_ioreg_text = fixture.ioreg_text;
}

v1::Topology AppleFixtureTopology(const AppleFixture& fixture) {
  const AppleSysctl& chip = fixture.chip;
  const uint32_t cores = chip.performance_cores + chip.efficiency_cores;
  const std::string cpus = cores == 0 ? "" : cores == 1 ? "0" : "0-" + std::to_string(cores - 1);
  v1::Topology t;
  t.set_source("apple-fixture:" + fixture.prefix);
  t.set_packages(1);
  t.set_cores(cores);
  t.set_pus(cores);
  t.set_memory_bytes(chip.memory_bytes);
  t.set_cpu_model(chip.brand);
  v1::CpuPackage* pkg = t.add_cpu_packages();
  pkg->set_os_index(0);
  pkg->set_cpuset(cpus);
  pkg->set_cpu_model(chip.brand);
  pkg->set_cores(cores);
  pkg->set_pus(cores);
  pkg->set_memory_bytes(chip.memory_bytes);
  v1::NumaNode* numa = t.add_numa_nodes();
  numa->set_os_index(0);
  numa->set_memory_bytes(chip.memory_bytes);
  numa->set_cpuset(cpus);
  numa->set_package(0);
  return t;
}

}  // namespace trainlet::accelerator
