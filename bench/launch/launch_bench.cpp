// trainlet-launch-bench: how long it takes to start N ranks and see them all finish, with
// trainlet and with its peers, each against the floor (the same processes started by a
// posix_spawn loop). Also the idle cost of one agent. Prints markdown; see bench/README.md.
//
// Every contender runs the same worker program (default /bin/true). Repetitions are interleaved
// (floor, trainlet, mpirun, srun, then again) so that noise on this shared machine hits all of
// them alike. Every process the benchmark starts is stopped by pid before it exits.
#include <sys/utsname.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <thread>

#include "launch/idle_probe.h"
#include "launch/subprocess.h"

namespace trainlet::bench {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using std::chrono::seconds;

struct Options {
  int reps = 7;
  int warmup = 1;
  int idle_seconds = 60;
  bool quick = false;
  bool keep = false;
  bool no_mpirun = false;
  bool no_srun = false;
  bool no_idle = false;
  std::string configs = "64x1,256x8";
  std::string worker = "/bin/true";
  std::string bin_dir;  // where trainletctl lives; default: this program's directory
  std::string dir;      // scratch; default: a new /tmp/trainlet-launch-bench-XXXXXX
  int job_timeout_s = 120;
};

struct Config {
  int ranks = 0;
  int agents = 0;
  std::string Label() const {
    return std::to_string(ranks) + " ranks / " + std::to_string(agents) +
           (agents == 1 ? " agent" : " agents");
  }
};

struct Samples {
  std::vector<double> ms;
  double Median() const {
    std::vector<double> v = ms;
    std::sort(v.begin(), v.end());
    size_t n = v.size();
    return n == 0 ? 0 : (n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2);
  }
  double Min() const { return ms.empty() ? 0 : *std::min_element(ms.begin(), ms.end()); }
};

// One contender's row in one configuration. `skipped` rows print their reason instead of numbers.
struct Row {
  std::string contender;
  Samples samples;
  std::string skipped;
};

struct ConfigResult {
  Config config;
  std::vector<Row> rows;   // floor first
  Samples cli_round_trip;  // `trainletctl get nodes`, for the analysis; not a contender
  Samples cli_start;       // `trainletctl --version`: process start and exit, no network
};

Result<std::vector<Config>> ParseConfigs(const std::string& text) {
  std::vector<Config> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    Config c;
    char x = 0;
    std::stringstream one(item);
    if (!(one >> c.ranks >> x >> c.agents) || x != 'x' || c.ranks < 1 || c.agents < 1 ||
        c.ranks % c.agents != 0) {
      return InvalidError("--configs: '" + item +
                          "' is not RANKSxAGENTS with RANKS a multiple of AGENTS (e.g. 64x1)");
    }
    out.push_back(c);
  }
  if (out.empty()) return InvalidError("--configs: empty");
  return out;
}

// A `trainletctl local up` cluster, taken down (by the pids it recorded) when this is destroyed.
class LocalCluster {
 public:
  static Result<std::unique_ptr<LocalCluster>> Up(const std::string& ctl, const std::string& dir,
                                                  int agents, int slots) {
    std::vector<std::string> argv = {
        ctl, "local", "up", "--agents", std::to_string(agents), "--dir", dir, "--timeout", "60"};
    if (slots > 0) {
      argv.push_back("--slots");
      argv.push_back(std::to_string(slots));
    }
    auto up = RunCommand(argv, {}, seconds(90), /*capture=*/true);
    // Construct first so that a half-started cluster is still taken down.
    auto cluster = std::unique_ptr<LocalCluster>(new LocalCluster(ctl, dir));
    if (!up.ok()) return up.status();
    if (up->exit_code != 0) {
      return UnavailableError("trainletctl local up --dir " + dir + " exited " +
                              std::to_string(up->exit_code) + ": " + up->output);
    }
    return cluster;
  }

  ~LocalCluster() {
    auto down = RunCommand({ctl_, "local", "down", "--dir", dir_}, {}, seconds(60), true);
    if (!down.ok() || down->exit_code != 0) {
      std::cerr << "warning: trainletctl local down --dir " << dir_
                << " failed: " << (down.ok() ? down->output : down.status().ToString()) << "\n";
    }
  }

  const std::string& dir() const { return dir_; }
  std::vector<std::string> Ctl(std::vector<std::string> args) const {
    args.insert(args.begin(), {ctl_, "--home", dir_});
    return args;
  }

 private:
  LocalCluster(std::string ctl, std::string dir) : ctl_(std::move(ctl)), dir_(std::move(dir)) {}
  std::string ctl_;
  std::string dir_;
};

Status WriteJob(const std::string& path, const std::string& name, const Config& c,
                const std::string& worker) {
  std::ofstream out(path);
  out << "apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata:\n  name: " << name
      << "\nspec:\n  runtimeRef:\n    name: plain\n  trainer:\n    numNodes: " << c.agents
      << "\n    numProcPerNode: " << c.ranks / c.agents << "\n    command: [\"" << worker
      << "\"]\n";
  out.close();
  if (!out) return IoError("cannot write " + path);
  return Status::Ok();
}

// Runs a command that must exit 0; returns its elapsed ms.
Result<double> MustRun(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                       seconds timeout) {
  TRAINLET_ASSIGN_OR_RETURN(CommandResult r, RunCommand(argv, env, timeout, true));
  if (r.exit_code != 0) {
    std::string cmd;
    for (const auto& a : argv) cmd += (cmd.empty() ? "" : " ") + a;
    return UnavailableError(cmd + " exited " + std::to_string(r.exit_code) + ": " + r.output);
  }
  return r.elapsed_ms;
}

// `trainletctl apply -f job.yaml --wait`: submit and block until Complete, one CLI process and one
// connection, as `sbatch --wait` or `mpirun` block. The job is deleted afterwards, outside the
// timed region.
Result<double> RunTrainletOnce(const LocalCluster& cluster, const Options& opt, const Config& c,
                               const std::string& name) {
  std::string yaml = cluster.dir() + "/" + name + ".yaml";
  TRAINLET_RETURN_IF_ERROR(WriteJob(yaml, name, c, opt.worker));
  seconds timeout(opt.job_timeout_s);
  TRAINLET_ASSIGN_OR_RETURN(
      double total_ms,
      MustRun(cluster.Ctl({"apply", "-f", yaml, "--wait",
                           "--timeout=" + std::to_string(opt.job_timeout_s) + "s"}),
              {}, timeout + seconds(10)));
  TRAINLET_ASSIGN_OR_RETURN(double del_ms,
                            MustRun(cluster.Ctl({"delete", "trainjob", name}), {}, timeout));
  (void)del_ms;
  return total_ms;
}

// Why srun cannot run here, or "" when it can.
std::string SrunUnavailableReason() {
  if (FindInPath("srun").empty()) return "no Slurm: srun not in PATH";
  auto info = RunCommand({"sinfo", "-h", "-o", "%T"}, {}, seconds(10), true);
  if (!info.ok()) return "no Slurm: " + info.status().message();
  if (info->exit_code != 0 || info->output.find_first_not_of(" \n") == std::string::npos) {
    return "no Slurm: sinfo finds no slurmctld or no node (run scripts/setup-slurm-localhost)";
  }
  return "";
}

Result<ConfigResult> RunConfig(const Options& opt, const std::string& ctl, const Config& c,
                               int config_index) {
  ConfigResult res;
  res.config = c;
  Row floor{"floor (posix_spawn loop)", {}, ""};
  Row trainlet{"trainlet (apply --wait, until Complete)", {}, ""};
  Row mpirun{"mpirun --oversubscribe -np " + std::to_string(c.ranks), {}, ""};
  Row srun{"srun -O -n " + std::to_string(c.ranks), {}, ""};

  std::vector<std::string> mpirun_argv = {
      "mpirun", "--oversubscribe",       "--mca",   "odls_base_num_threads", "0",
      "-np",    std::to_string(c.ranks), opt.worker};
  std::vector<std::string> mpirun_env;
  if (geteuid() == 0) {
    mpirun_env = {"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"};
  }
  if (opt.no_mpirun) {
    mpirun.skipped = "mpirun: skipped (--no-mpirun)";
  } else if (FindInPath("mpirun").empty()) {
    mpirun.skipped = "mpirun: skipped (not installed: apt-get install openmpi-bin)";
  }
  std::vector<std::string> srun_argv = {"srun", "--overcommit",          "--immediate=30",
                                        "-n",   std::to_string(c.ranks), opt.worker};
  if (opt.no_srun) {
    srun.skipped = "srun: skipped (--no-srun)";
  } else if (std::string why = SrunUnavailableReason(); !why.empty()) {
    srun.skipped = "srun: skipped (" + why + ")";
  }

  std::string cluster_dir =
      opt.dir + "/cluster-" + std::to_string(c.ranks) + "x" + std::to_string(c.agents);
  std::cerr << "== " << c.Label() << ": starting local cluster in " << cluster_dir << "\n";
  TRAINLET_ASSIGN_OR_RETURN(auto cluster,
                            LocalCluster::Up(ctl, cluster_dir, c.agents, c.ranks / c.agents));

  seconds timeout(opt.job_timeout_s);
  for (int rep = -opt.warmup; rep < opt.reps; ++rep) {
    bool timed = rep >= 0;
    if (StopRequested()) return UnavailableError("interrupted");
    TRAINLET_ASSIGN_OR_RETURN(double floor_ms, SpawnLoop(opt.worker, c.ranks));
    if (timed) floor.samples.ms.push_back(floor_ms);

    std::string name = "launch-" + std::to_string(config_index) + "-" +
                       (timed ? "r" + std::to_string(rep) : "warm" + std::to_string(-rep));
    TRAINLET_ASSIGN_OR_RETURN(double trainlet_ms, RunTrainletOnce(*cluster, opt, c, name));
    TRAINLET_ASSIGN_OR_RETURN(double rt_ms, MustRun(cluster->Ctl({"get", "nodes"}), {}, timeout));
    if (timed) {
      trainlet.samples.ms.push_back(trainlet_ms);
      res.cli_round_trip.ms.push_back(rt_ms);
      TRAINLET_ASSIGN_OR_RETURN(double start_ms, MustRun({ctl, "--version"}, {}, timeout));
      res.cli_start.ms.push_back(start_ms);
    }

    if (mpirun.skipped.empty()) {
      TRAINLET_ASSIGN_OR_RETURN(double ms, MustRun(mpirun_argv, mpirun_env, timeout));
      if (timed) mpirun.samples.ms.push_back(ms);
    }
    if (srun.skipped.empty()) {
      TRAINLET_ASSIGN_OR_RETURN(double ms, MustRun(srun_argv, {}, timeout));
      if (timed) srun.samples.ms.push_back(ms);
    }
    std::cerr << "   rep " << rep << ": floor " << floor_ms << " ms, trainlet " << trainlet_ms
              << " ms\n";
  }
  res.rows = {floor, trainlet, mpirun, srun};
  return res;
}

std::string Fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string MachineDescription() {
  std::string model = "unknown CPU";
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("model name", 0) == 0) {
      model = line.substr(line.find(':') + 2);
      break;
    }
  }
  utsname u{};
  uname(&u);
  return std::to_string(sysconf(_SC_NPROCESSORS_ONLN)) + " CPUs (" + model + "), " +
         std::to_string(static_cast<long long>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGESIZE) >>
                        20) +
         " MiB RAM, Linux " + u.release;
}

std::string Today() {
  std::time_t now = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M UTC", std::gmtime(&now));
  return buf;
}

void PrintResults(const Options& opt, const std::vector<ConfigResult>& results,
                  const std::optional<IdleReport>& idle, const std::string& idle_error) {
  std::cout << "# trainlet launch benchmark\n\n"
            << "- machine: " << MachineDescription() << "\n"
            << "- date: " << Today() << "\n"
            << "- worker: `" << opt.worker << "` for every contender; " << opt.reps
            << " timed repetitions after " << opt.warmup << " warm-up, interleaved\n\n"
            << "| config | contender | median ms | min ms | × floor |\n"
            << "| --- | --- | ---: | ---: | ---: |\n";
  for (const auto& r : results) {
    double floor = r.rows[0].samples.Median();
    for (const auto& row : r.rows) {
      if (!row.skipped.empty()) {
        std::cout << "| " << r.config.Label() << " | " << row.skipped << " | | | |\n";
        continue;
      }
      double med = row.samples.Median();
      std::cout << "| " << r.config.Label() << " | " << row.contender << " | " << Fixed(med, 1)
                << " | " << Fixed(row.samples.Min(), 1) << " | "
                << (floor > 0 ? Fixed(med / floor, 2) : "-") << " |\n";
    }
  }
  std::cout << "\n";
  for (const auto& r : results) {
    std::cout << "- trainlet, " << r.config.Label() << ": for scale, one CLI round trip "
              << "(`trainletctl get nodes`) " << Fixed(r.cli_round_trip.Median(), 1)
              << " ms, of which starting and exiting the CLI process (`trainletctl --version`) "
              << Fixed(r.cli_start.Median(), 1) << " ms\n";
  }

  // Launch targets: the first configuration with one agent.
  for (const auto& r : results) {
    if (r.config.agents != 1) continue;
    double floor = r.rows[0].samples.Median();
    double tl = r.rows[1].samples.Median();
    std::cout << "\n## Targets (" << r.config.Label() << ")\n\n"
              << "- trainlet within 2× of the floor: " << Fixed(tl / floor, 2) << "× → "
              << (tl <= 2 * floor ? "PASS" : "MISS") << "\n";
    const Row& mpi = r.rows[2];
    if (mpi.skipped.empty()) {
      double m = mpi.samples.Median();
      std::cout << "- trainlet under half of mpirun's time: " << Fixed(tl / m, 2) << "× mpirun → "
                << (tl < 0.5 * m ? "PASS" : "MISS") << "\n";
    } else {
      std::cout << "- trainlet under half of mpirun's time: not measured (" << mpi.skipped << ")\n";
    }
    break;
  }

  std::cout << "\n## Agent idle cost\n\n";
  if (!idle) {
    std::cout << "- " << idle_error << "\n";
    return;
  }
  std::cout << PrintIdleReport(*idle);
}

int Main(int argc, char** argv) {
  Options opt;
  CLI::App app{"Launch latency of trainlet vs posix_spawn, mpirun and srun; agent idle cost"};
  app.add_option("--reps", opt.reps, "Timed repetitions per contender")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--warmup", opt.warmup, "Untimed repetitions first")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--configs", opt.configs, "RANKSxAGENTS list")->capture_default_str();
  app.add_option("--worker", opt.worker, "Program every contender starts N times")
      ->capture_default_str();
  app.add_option("--idle-seconds", opt.idle_seconds, "How long the agent idles")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_flag("--quick", opt.quick, "3 reps and a 10 s idle window, for a smoke run");
  app.add_flag("--no-mpirun", opt.no_mpirun, "Skip mpirun");
  app.add_flag("--no-srun", opt.no_srun, "Skip srun");
  app.add_flag("--no-idle", opt.no_idle, "Skip the agent idle measurement");
  app.add_option("--bin-dir", opt.bin_dir, "Directory with trainletctl (default: next to this)");
  app.add_option("--dir", opt.dir, "Scratch directory (default: a new one under /tmp)");
  app.add_flag("--keep", opt.keep, "Keep the scratch directory (cluster logs)");
  app.add_option("--job-timeout", opt.job_timeout_s, "Seconds before a run counts as hung")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (opt.quick) {
    if (app.count("--reps") == 0) opt.reps = 3;
    if (app.count("--idle-seconds") == 0) opt.idle_seconds = 10;
  }

  InstallStopHandler();
  auto configs = ParseConfigs(opt.configs);
  if (!configs.ok()) {
    std::cerr << "error: " << configs.status().ToString() << "\n";
    return 2;
  }
  if (opt.bin_dir.empty()) opt.bin_dir = fs::read_symlink("/proc/self/exe").parent_path();
  std::string ctl = opt.bin_dir + "/trainletctl";
  if (access(ctl.c_str(), X_OK) != 0) {
    std::cerr << "error: " << ctl << " not found; build it or pass --bin-dir\n";
    return 2;
  }
  bool made_dir = false;
  if (opt.dir.empty()) {
    char tmpl[] = "/tmp/trainlet-launch-bench-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) {
      std::perror("mkdtemp");
      return 2;
    }
    opt.dir = tmpl;
    made_dir = true;
  } else {
    fs::create_directories(opt.dir);
  }

  int rc = 0;
  std::vector<ConfigResult> results;
  for (size_t i = 0; i < configs->size() && rc == 0; ++i) {
    auto r = RunConfig(opt, ctl, (*configs)[i], static_cast<int>(i));
    if (!r.ok()) {
      std::cerr << "error: " << (*configs)[i].Label() << ": " << r.status().ToString() << "\n";
      rc = 1;
    } else {
      results.push_back(std::move(*r));
    }
  }
  std::optional<IdleReport> idle;
  std::string idle_error = "skipped (--no-idle)";
  if (rc == 0 && !opt.no_idle && !StopRequested()) {
    std::cerr << "== agent idle: " << opt.idle_seconds << " s\n";
    auto cluster = LocalCluster::Up(ctl, opt.dir + "/cluster-idle", 1, 0);
    if (!cluster.ok()) {
      idle_error = cluster.status().ToString();
    } else {
      auto report = MeasureIdle((*cluster)->dir(), seconds(opt.idle_seconds),
                                (fs::path(ctl).parent_path() / "trainlet-rss-floor").string());
      if (report.ok()) {
        idle = *report;
      } else {
        idle_error = report.status().ToString();
      }
    }
    if (!idle) rc = 1;
  }
  if (!results.empty()) PrintResults(opt, results, idle, idle_error);
  if (rc != 0 || opt.keep) {
    std::cerr << "scratch directory (cluster logs) kept: " << opt.dir << "\n";
  } else if (made_dir) {
    fs::remove_all(opt.dir);
  }
  return rc;
}

}  // namespace
}  // namespace trainlet::bench

int main(int argc, char** argv) { return trainlet::bench::Main(argc, argv); }
