#include "coordinator/cluster_identity.h"

#include <spdlog/spdlog.h>
#include <unistd.h>  // getentropy (glibc)
#if defined(__APPLE__)
#include <sys/random.h>  // getentropy (macOS)
#endif

#include <random>

namespace trainlet::coordinator {

std::string NewClusterId() {
  // One getentropy call (the kernel's getrandom on Linux, no descriptor), since every TrainJob's
  // uid is one of these: std::random_device opened /dev/urandom and read it 8 times per id.
  uint32_t words[8];
  if (getentropy(words, sizeof words) != 0) {
    std::random_device rd;  // a kernel without getrandom: /dev/urandom
    for (auto& w : words) w = rd();
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string id;
  id.reserve(32);
  for (uint32_t v : words) {
    for (int j = 0; j < 4; ++j, v >>= 4) id += kHex[v & 0xf];
  }
  return id;
}

namespace {

// Whether `store` holds anything an operator or a running cluster put there.
Result<bool> HoldsRecords(JobStore& store) {
  TRAINLET_ASSIGN_OR_RETURN(auto jobs, store.ListJobs());
  if (!jobs.empty()) return true;
  TRAINLET_ASSIGN_OR_RETURN(auto runtimes, store.ListRuntimes());
  if (!runtimes.empty()) return true;
  TRAINLET_ASSIGN_OR_RETURN(auto queues, store.ListQueueObjects());
  if (!queues.empty()) return true;
  TRAINLET_ASSIGN_OR_RETURN(auto cordons, store.ListNodeCordons());
  return !cordons.empty();
}

}  // namespace

Result<std::string> EstablishClusterId(JobStore& store, bool init,
                                       const std::function<std::string()>& make_id) {
  TRAINLET_ASSIGN_OR_RETURN(std::string id, store.GetClusterId());
  if (!id.empty()) {
    if (init) spdlog::info("{} is initialised already: cluster id {}", store.location(), id);
    return id;
  }
  TRAINLET_ASSIGN_OR_RETURN(const bool records, HoldsRecords(store));
  if (!records && !init) {
    return InvalidError(
        store.location() +
        " holds no cluster: no cluster id, no job, no runtime. If this is a new cluster, "
        "initialise its store once with `trainlet-coordinator --init-store` (with this "
        "coordinator's flags or --config). If the cluster had jobs, its store was lost or "
        "emptied: restore it from a backup instead. A store initialised anew is a new cluster: "
        "the agents of the old one refuse it and keep their ranks running until each is "
        "re-pointed (docs/operations.md, \"Cluster identity\")");
  }
  id = make_id();
  TRAINLET_RETURN_IF_ERROR(store.PutClusterId(id));
  if (records) {
    spdlog::warn(
        "{} holds records but no cluster id (written before cluster identities): "
        "adopted cluster id {}",
        store.location(), id);
  } else {
    spdlog::info("{} initialised: new cluster id {}", store.location(), id);
  }
  return id;
}

}  // namespace trainlet::coordinator
