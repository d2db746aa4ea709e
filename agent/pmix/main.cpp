// trainlet-pmix: the PMIx server of one MPI attempt's ranks on one node. Started by trainlet-step
// (never by hand) with the env of the node's first rank, before the ranks; see pmix_host.h.
//
// stdout is the rank env stream (common/pmix/pmix_job_map.h), read by the step until "ready";
// then stdout is closed and the server serves until SIGTERM or until the step kills it with the
// ranks. stderr goes to the first local rank's log.
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "agent/pmix/dstore_sizes.h"
#include "agent/pmix/pmix_host.h"
#include "common/pmix/node_topology_xml.h"
#include "common/secret_env.h"

namespace {

using trainlet::Result;
using trainlet::pmix::PmixHostConfig;

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::string() : std::string(v);
}

Result<PmixHostConfig> ConfigFromEnv() {
  const std::string path = Env(trainlet::pmix::kJobMapEnv);
  std::ifstream in(path);
  if (path.empty() || !in) {
    return trainlet::InvalidError(std::string(trainlet::pmix::kJobMapEnv) + " '" + path +
                                  "' cannot be read");
  }
  std::stringstream text;
  text << in.rdbuf();
  TRAINLET_ASSIGN_OR_RETURN(trainlet::pmix::PmixJobMap map,
                            trainlet::pmix::DecodeJobMap(text.str()));
  PmixHostConfig c;
  c.map = std::move(map);
  c.node_rank = static_cast<uint32_t>(std::strtoul(Env("TRAINLET_NODE_RANK").c_str(), nullptr, 10));
  c.job = Env("TRAINLET_JOB");
  c.attempt = static_cast<uint32_t>(std::strtoul(Env("TRAINLET_ATTEMPT").c_str(), nullptr, 10));
  c.rendezvous_endpoint = Env("TRAINLET_RENDEZVOUS_ENDPOINT");
  c.rendezvous_token = trainlet::ReadSecretFromEnv("TRAINLET_RENDEZVOUS_TOKEN").value;
  c.topology_xml = Env(trainlet::pmix::kNodeTopologyXmlEnv);
  if (c.job.empty() || c.attempt == 0 || c.rendezvous_endpoint.empty())
    return trainlet::InvalidError(
        "TRAINLET_JOB, TRAINLET_ATTEMPT and TRAINLET_RENDEZVOUS_ENDPOINT must be set");
  return c;
}

// One "env" line of the rank env stream per local rank, each setting `key_value`.
std::string ForEveryLocalRank(const PmixHostConfig& c, const std::string& key_value) {
  std::string lines;
  for (const uint32_t rank : c.map.nodes.at(c.node_rank).ranks) {
    lines += trainlet::pmix::EncodeRankEnvLine(rank, key_value).value();
  }
  return lines;
}

// "env" lines that set OMPI_MCA_mpi_yield_when_idle=1 for every local rank when the node has more
// ranks than CPUs we may run on, unless the job's env (the first rank's, which is ours) sets it.
// OpenMPI's own daemon does the same for an oversubscribed node (orted sets it in the ranks' env),
// so that a rank waiting in a collective gives its CPU to the ranks it waits for; ranks started
// directly have no orted to do it. Without it 64 ranks on 2 CPUs spent 3.5 s busy-polling in one
// allreduce (bench/mpi-launch, bench/README.md).
std::string YieldWhenOversubscribed(const PmixHostConfig& c) {
  if (std::getenv("OMPI_MCA_mpi_yield_when_idle") != nullptr) return "";
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return "";
  const std::vector<uint32_t>& ranks = c.map.nodes.at(c.node_rank).ranks;
  if (ranks.size() <= static_cast<size_t>(CPU_COUNT(&set))) return "";
  return ForEveryLocalRank(c, "OMPI_MCA_mpi_yield_when_idle=1");
}

// "env" lines that set OMPI_MCA_orte_bound_at_launch=1 for every local rank when trainlet binds
// the node's ranks (TRAINLET_CPUSET in the first rank's env, which is ours; one node's ranks are
// bound alike; where the agent only reports a binding it cannot apply, the flag merely keeps
// OpenMPI from binding by itself, which it does only under a binding policy, and we leave that
// case alone), unless the job's env says how OpenMPI should bind or sets the flag itself. It is
// what orted tells the ranks it binds: the launcher placed the rank, so MPI_Init neither binds
// itself nor loads the node's topology to find out whether someone else did (ess_base_fns.c,
// orte_ess_base_proc_binding), about 3 ms of CPU per rank with the topology shared, 12 without.
std::string BoundAtLaunch(const PmixHostConfig& c) {
  const char* cpuset = std::getenv("TRAINLET_CPUSET");
  if (cpuset == nullptr || *cpuset == '\0') return "";
  if (std::getenv("OMPI_MCA_orte_bound_at_launch") != nullptr ||
      std::getenv("OMPI_MCA_hwloc_base_binding_policy") != nullptr)
    return "";
  return ForEveryLocalRank(c, "OMPI_MCA_orte_bound_at_launch=1");
}

// Fits libpmix's shared-memory store to the job (dstore_sizes.h): sets NS_META_SEG_SIZE and
// NS_DATA_SEG_SIZE in our env, for libpmix, unless the job's env (which we run with) sets them,
// and returns the "env" lines that give every local rank the values libpmix here uses: the
// clients map the segments with the sizes they read from their own env. Call before
// StartPmixHost: setenv before libpmix starts its threads.
std::string FitDstore(const PmixHostConfig& c) {
  struct stat st {};
  const uint64_t xml_bytes =
      !c.topology_xml.empty() && stat(c.topology_xml.c_str(), &st) == 0 && st.st_size > 0
          ? static_cast<uint64_t>(st.st_size)
          : 0;
  const trainlet::pmix::DstoreSizes fit =
      trainlet::pmix::FitDstoreSizes(c.map.Size(), c.map.nodes.size(), xml_bytes);
  std::string lines;
  for (const auto& [key, bytes] : {std::pair{trainlet::pmix::kMetaSegmentEnv, fit.meta_bytes},
                                   std::pair{trainlet::pmix::kDataSegmentEnv, fit.data_bytes}}) {
    if (bytes > 0) setenv(key, std::to_string(bytes).c_str(), 0);
    const char* value = std::getenv(key);
    if (value != nullptr) lines += ForEveryLocalRank(c, std::string(key) + "=" + value);
  }
  return lines;
}

void WriteAll(const std::string& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = write(STDOUT_FILENO, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the step is gone: nothing to tell
    done += static_cast<size_t>(n);
  }
}

void CloseStdout() {
  const int null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (null_fd >= 0) {
    dup2(null_fd, STDOUT_FILENO);
    close(null_fd);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && std::strcmp(argv[1], "--version") == 0) {
    std::printf("trainlet-pmix %s\n", TRAINLET_VERSION);
    return 0;
  }
  // Blocked before libpmix starts its threads, so only RunPmixHost's sigtimedwait takes them.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  signal(SIGPIPE, SIG_IGN);

  // The clients are this node's ranks on a unix socket: PMIx's native security (the peer's uid,
  // from the kernel) is all they need. Left to itself libpmix also selects its munge component,
  // whose start asks munged for a credential; where munge is installed but munged is not running
  // (a stale /run/munge socket), libmunge retries for about 2.3 s, and every node's ranks wait
  // for that before they start. PMIX_MCA_psec in the job's env (which we run with) still wins.
  setenv("PMIX_MCA_psec", "native", 0);
  // hwloc's libxml2 plugin, loaded at its first topology, only adds libxml2 and ICU to the
  // dynamic loader's work: hwloc's own XML code reads and writes what the agent and libpmix
  // exchange (the agent leaves it out too, agent/topology.cpp). The operator's setting wins.
  setenv("HWLOC_PLUGINS_BLACKLIST", "hwloc_xml_libxml", 0);

  Result<PmixHostConfig> config = ConfigFromEnv();
  // libpmix's files (its shared-memory store) live in the job's work dir, per attempt and node, so
  // that a server killed with its ranks leaves nothing in /tmp; a stale one is removed first.
  std::string dir;
  if (config.ok()) {
    const std::string work = Env("TRAINLET_WORK_DIR");
    dir = (work.empty() ? std::filesystem::temp_directory_path().string() : work) +
          "/.pmix/attempt-" + std::to_string(config->attempt) + "-node-" +
          std::to_string(config->node_rank);
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
    std::filesystem::create_directories(dir, ec);
    if (ec) config = trainlet::IoError("PMIx directory " + dir + ": " + ec.message());
  }
  std::string dstore_lines;
  Result<std::string> lines =
      config.ok() ? [&] {
        config->tmpdir = dir;
        dstore_lines = FitDstore(*config);
        return trainlet::pmix::StartPmixHost(*config);
      }()
                  : Result<std::string>(config.status());
  if (!lines.ok()) {
    std::fprintf(stderr, "trainlet-pmix: %s\n", lines.status().message().c_str());
    WriteAll("error PMIx server: " + lines.status().message() + "\n");
    return 1;
  }
  WriteAll(*lines + dstore_lines + YieldWhenOversubscribed(*config) + BoundAtLaunch(*config) +
           "ready\n");
  CloseStdout();
  const int rc = trainlet::pmix::RunPmixHost();
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
  return rc;
}
