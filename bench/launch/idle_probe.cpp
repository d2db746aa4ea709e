#include "launch/idle_probe.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "common/platform/process_info.h"
#include "launch/subprocess.h"

namespace trainlet::bench {
namespace {

namespace fs = std::filesystem;

// Start-up work (registration, first heartbeats, topology discovery) is not idle cost.
constexpr std::chrono::seconds kSettle{3};
constexpr double kRssTargetMiB = 8.0;
constexpr double kCpuTargetPercent = 0.2;

struct PidFile {
  pid_t pid = 0;
  unsigned long long start_time = 0;
};

Result<PidFile> ReadPidFile(const std::string& path) {
  std::ifstream in(path);
  PidFile f;
  if (!(in >> f.pid >> f.start_time)) {
    return NotFoundError(path + ": no \"<pid> <starttime>\" (is the cluster up?)");
  }
  return f;
}

Result<ProcessSample> Sample(pid_t pid) {
  std::string base = "/proc/" + std::to_string(pid);
  ProcessSample s;
  std::ifstream status(base + "/status");
  if (!status) return NotFoundError(base + "/status: process gone");
  for (std::string line; std::getline(status, line);) {
    std::stringstream fields(line);
    std::string key;
    fields >> key;
    if (key == "VmRSS:") fields >> s.rss_kb;
    if (key == "VmHWM:") fields >> s.hwm_kb;
    if (key == "Threads:") fields >> s.threads;
    if (key == "RssAnon:") fields >> s.anon_kb;
    if (key == "RssFile:") fields >> s.file_kb;
  }
  std::ifstream rollup(base + "/smaps_rollup");  // absent before Linux 4.14: Pss stays 0
  for (std::string line; std::getline(rollup, line);) {
    if (line.rfind("Pss:", 0) == 0) s.pss_kb = std::stol(line.substr(4));
  }
  std::ifstream stat_file(base + "/stat");
  std::string stat;
  if (!std::getline(stat_file, stat)) return NotFoundError(base + "/stat: process gone");
  auto close_paren = stat.rfind(')');
  if (close_paren == std::string::npos) return InternalError(base + "/stat: unexpected format");
  std::stringstream rest(stat.substr(close_paren + 2));
  std::string field;
  long long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && rest >> field; ++i) {  // utime is field 14, stime field 15
    if (i == 14) utime = std::stoll(field);
    if (i == 15) stime = std::stoll(field);
  }
  s.cpu_ticks = utime + stime;
  std::error_code ec;
  for (const auto& task : fs::directory_iterator(base + "/task", ec)) {
    std::ifstream sched(task.path() / "schedstat");
    long long ns = 0;
    if (sched >> ns) s.sched_ns += ns;
  }
  return s;
}

Result<ProcessIdle> Begin(const std::string& pid_path, std::string name) {
  TRAINLET_ASSIGN_OR_RETURN(PidFile f, ReadPidFile(pid_path));
  if (!platform::SameProcessAlive(f.pid, f.start_time)) {
    return NotFoundError(name + " (pid " + std::to_string(f.pid) + " from " + pid_path +
                         ") is not running");
  }
  ProcessIdle p;
  p.name = std::move(name);
  p.pid = f.pid;
  TRAINLET_ASSIGN_OR_RETURN(p.before, Sample(f.pid));
  return p;
}

std::string Fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

double CpuSeconds(const ProcessIdle& p) { return (p.after.sched_ns - p.before.sched_ns) / 1e9; }

double TickSeconds(const ProcessIdle& p, long hz) {
  return static_cast<double>(p.after.cpu_ticks - p.before.cpu_ticks) / hz;
}

// Starts `binary` (output discarded), samples it after the settle time, then stops it.
Result<ProcessSample> SampleFloor(const std::string& binary) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  char* argv[] = {const_cast<char*>(binary.c_str()), nullptr};
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, binary.c_str(), &actions, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return InternalError(binary + ": " + std::strerror(rc));
  std::this_thread::sleep_for(kSettle);
  Result<ProcessSample> sample = Sample(pid);
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  return sample;
}

}  // namespace

Result<IdleReport> MeasureIdle(const std::string& cluster_dir, std::chrono::seconds idle,
                               const std::string& floor_binary) {
  std::optional<ProcessSample> floor;
  if (!floor_binary.empty() && fs::exists(floor_binary)) {
    TRAINLET_ASSIGN_OR_RETURN(floor, SampleFloor(floor_binary));
  }
  std::this_thread::sleep_for(kSettle);
  IdleReport r;
  r.clock_ticks_per_s = sysconf(_SC_CLK_TCK);
  TRAINLET_ASSIGN_OR_RETURN(r.agent, Begin(cluster_dir + "/pids/node-1.pid", "agent node-1"));
  TRAINLET_ASSIGN_OR_RETURN(r.coordinator,
                            Begin(cluster_dir + "/pids/coordinator.pid", "coordinator"));
  auto start = Clock::now();
  auto end = start + idle;
  while (Clock::now() < end) {
    if (StopRequested()) return UnavailableError("interrupted during the idle window");
    std::this_thread::sleep_for(
        std::min<Clock::duration>(std::chrono::milliseconds(200), end - Clock::now()));
  }
  TRAINLET_ASSIGN_OR_RETURN(r.agent.after, Sample(r.agent.pid));
  TRAINLET_ASSIGN_OR_RETURN(r.coordinator.after, Sample(r.coordinator.pid));
  r.wall_s = std::chrono::duration<double>(Clock::now() - start).count();
  r.library_floor = floor;
  return r;
}

std::string PrintIdleReport(const IdleReport& r) {
  std::ostringstream out;
  const ProcessIdle& a = r.agent;
  double rss_mib = a.after.rss_kb / 1024.0;
  double cpu_s = CpuSeconds(a);
  double pct = 100.0 * cpu_s / r.wall_s;
  out << "Agent (1 agent, pid " << a.pid << ", " << a.after.threads << " threads), idle for "
      << Fixed(r.wall_s, 1) << " s after a " << kSettle.count() << " s settle:\n\n"
      << "- RSS " << Fixed(rss_mib, 2) << " MiB (" << a.after.rss_kb << " kB; " << a.before.rss_kb
      << " kB at the start of the window, peak " << a.after.hwm_kb << " kB; anonymous "
      << a.after.anon_kb << " kB, file-backed (binary and shared libraries) " << a.after.file_kb
      << " kB; PSS " << a.after.pss_kb << " kB). Target ≤ " << Fixed(kRssTargetMiB, 0)
      << " MiB: " << (rss_mib <= kRssTargetMiB ? "PASS" : "MISS") << "\n"
      << "- CPU " << Fixed(pct, 3) << "% of one core = " << Fixed(cpu_s / r.wall_s * 60, 4)
      << " CPU-s per minute (schedstat, ns; utime+stime says "
      << Fixed(TickSeconds(a, r.clock_ticks_per_s), 2) << " s in " << Fixed(r.wall_s, 1) << " s at "
      << r.clock_ticks_per_s << " ticks/s). Target < " << Fixed(kCpuTargetPercent, 1)
      << "%: " << (pct < kCpuTargetPercent ? "PASS" : "MISS") << "\n";
  if (r.library_floor) {
    const ProcessSample& f = *r.library_floor;
    out << "- the floor of the agent's libraries (trainlet-rss-floor: hwloc topology, libzmq with "
           "a "
        << "CURVE socket, protobuf-lite with the wire messages, spdlog, yaml-cpp; no other "
           "trainlet "
        << "code): RSS " << Fixed(f.rss_kb / 1024.0, 2) << " MiB (anonymous " << f.anon_kb
        << " kB, file-backed " << f.file_kb << " kB; PSS " << f.pss_kb << " kB). The agent adds "
        << Fixed((a.after.rss_kb - f.rss_kb) / 1024.0, 2) << " MiB to it\n";
  }
  const ProcessIdle& c = r.coordinator;
  double c_cpu = CpuSeconds(c);
  out << "- for context, the coordinator over the same window: RSS "
      << Fixed(c.after.rss_kb / 1024.0, 2) << " MiB, CPU " << Fixed(100.0 * c_cpu / r.wall_s, 3)
      << "% of one core (" << Fixed(c_cpu / r.wall_s * 60, 4) << " CPU-s per minute)\n";
  return out.str();
}

}  // namespace trainlet::bench
