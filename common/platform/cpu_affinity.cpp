#include "common/platform/cpu_affinity.h"

#include <cerrno>
#include <cstring>

#if defined(__linux__)
#include <sched.h>
#endif

namespace trainlet::platform {

#if defined(__linux__)

bool CpuAffinitySupported() { return true; }

int BindThisThread(const std::vector<unsigned>& cpus, SavedAffinity* saved) {
  cpu_set_t old_mask;
  if (sched_getaffinity(0, sizeof old_mask, &old_mask) != 0) return errno;
  cpu_set_t mask;
  CPU_ZERO(&mask);
  for (unsigned c : cpus) {
    if (c < CPU_SETSIZE) CPU_SET(c, &mask);
  }
  // Bound to those already (every rank of a job that has the whole machine): nothing to set, and
  // nothing to restore.
  if (CPU_EQUAL(&mask, &old_mask)) {
    saved->bytes.clear();
    return 0;
  }
  if (sched_setaffinity(0, sizeof mask, &mask) != 0) return errno;
  saved->bytes.resize(sizeof old_mask);
  std::memcpy(saved->bytes.data(), &old_mask, sizeof old_mask);
  return 0;
}

void RestoreThisThread(const SavedAffinity& saved) {
  cpu_set_t mask;
  if (saved.bytes.size() != sizeof mask) return;
  std::memcpy(&mask, saved.bytes.data(), sizeof mask);
  sched_setaffinity(0, sizeof mask, &mask);
}

std::vector<unsigned> ThisThreadCpus() {
  std::vector<unsigned> out;
  cpu_set_t mask;
  if (sched_getaffinity(0, sizeof mask, &mask) != 0) return out;
  for (unsigned c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &mask)) out.push_back(c);
  }
  return out;
}

#else  // macOS and others: no thread affinity

bool CpuAffinitySupported() { return false; }
int BindThisThread(const std::vector<unsigned>&, SavedAffinity*) { return 0; }
void RestoreThisThread(const SavedAffinity&) {}
std::vector<unsigned> ThisThreadCpus() { return {}; }

#endif

}  // namespace trainlet::platform
