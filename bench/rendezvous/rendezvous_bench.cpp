// bench/rendezvous: put + fence + get-all for 256, 1,024 and 4,096 ranks on 8 local agents,
// beside PyTorch's TCPStore doing the same. See README.md in this folder for the results.
//
//   trainlet-rendezvous-bench [--ranks 256,1024,4096] [--iters 7] [--no-tcpstore]
//
// Each count runs as one TrainJob on a fresh `trainletctl local up --agents 8` cluster: 8 nodes x
// N/8 ranks. Local rank 0 of each node is this binary in driver mode, speaking for all N/8 ranks
// of its node through the C API (one handle per rank, fence_start on all, then fence_finish on
// all); the other local ranks only exist (sleep), so the agent sees the real rank count. Node 0's
// driver prints one line per iteration; the table shows medians.
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/secret_env.h"
#include "trainlet/rendezvous.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

const char* Env(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) {
    std::fprintf(stderr, "driver: %s not set\n", name);
    std::exit(2);
  }
  return v;
}

void Check(int rc, trainlet_rdzv* h, const char* what) {
  if (rc == TRAINLET_RDZV_OK) return;
  std::printf("driver: %s: %s: %s\n", what, trainlet_rdzv_code_name(rc),
              trainlet_rdzv_last_error(h));
  std::fflush(stdout);
  std::exit(3);
}

int Driver(int iters) {
  if (std::atoi(Env("TRAINLET_LOCAL_RANK")) != 0) {
    // A rank the driver of this node speaks for: it only has to exist until the job is deleted.
    execl("/bin/sleep", "sleep", "3600", static_cast<char*>(nullptr));
    return 1;
  }
  const uint32_t base = static_cast<uint32_t>(std::atoi(Env("TRAINLET_RANK")));
  const uint32_t local = static_cast<uint32_t>(std::atoi(Env("TRAINLET_LOCAL_WORLD_SIZE")));
  const uint32_t world = static_cast<uint32_t>(std::atoi(Env("TRAINLET_WORLD_SIZE")));
  const uint32_t attempt = static_cast<uint32_t>(std::atoi(Env("TRAINLET_ATTEMPT")));
  std::vector<trainlet_rdzv*> handles(local);
  for (uint32_t i = 0; i < local; ++i) {
    Check(trainlet_rdzv_open_with(
              Env("TRAINLET_RENDEZVOUS_ENDPOINT"),
              trainlet::ReadSecretFromEnv("TRAINLET_RENDEZVOUS_TOKEN").value.c_str(),
              Env("TRAINLET_JOB"), attempt, base + i, &handles[i]),
          handles[i], "open");
  }
  std::vector<std::string> keys;
  for (uint32_t r = 0; r < world; ++r) keys.push_back("addr/" + std::to_string(r));
  auto fence = [&](int timeout_ms) {
    for (auto* h : handles) Check(trainlet_rdzv_fence_start(h), h, "fence_start");
    for (auto* h : handles) Check(trainlet_rdzv_fence_finish(h, timeout_ms), h, "fence_finish");
  };
  fence(300000);  // warm-up: waits for every driver (and rank) of the job to exist
  char buf[64];
  for (int it = 1; it <= iters; ++it) {
    // An untimed fence lines the drivers up first, as MPI benchmarks put a barrier before the
    // timed region: otherwise a driver still reading the previous iteration's get-all on these
    // shared cores would count as fence time on node 0.
    fence(60000);
    const auto t0 = Clock::now();
    for (uint32_t i = 0; i < local; ++i) {
      const std::string v = "10.0." + std::to_string((base + i) / 256) + "." +
                            std::to_string((base + i) % 256) + ":29500";
      Check(trainlet_rdzv_put(handles[i], keys[base + i].c_str(), v.data(), v.size()), handles[i],
            "put");
    }
    fence(60000);
    const auto t1 = Clock::now();
    size_t bytes = 0;
    for (auto* h : handles) {
      for (const auto& k : keys) {
        size_t len = 0;
        Check(trainlet_rdzv_get(h, k.c_str(), buf, sizeof buf, &len, 0), h, "get");
        bytes += len;
      }
    }
    const auto t2 = Clock::now();
    // get-all per rank: ranks read in parallel on a real cluster; here one process reads for all.
    std::printf("iter %d fence_ms %.3f getall_ms %.4f bytes %zu\n", it, Ms(t1 - t0),
                Ms(t2 - t1) / local, bytes);
    std::fflush(stdout);
  }
  std::printf("RESULT done\n");
  std::fflush(stdout);
  for (auto* h : handles) trainlet_rdzv_close(h);
  return 0;
}

// Runs argv, returns its stdout; exit status in *status.
std::string Run(const std::vector<std::string>& argv, int* status = nullptr) {
  std::string cmd;
  for (const auto& a : argv) cmd += "'" + a + "' ";
  cmd += "2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  size_t n;
  while (p != nullptr && (n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int rc = p != nullptr ? pclose(p) : -1;
  if (status != nullptr) *status = rc;
  return out;
}

double Median(std::vector<double> v) {
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

struct Numbers {
  std::vector<double> fence, getall;
  std::string error;
};

void ParseIters(const std::string& text, Numbers* n) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    const auto at = line.find("iter ");
    if (at == std::string::npos) continue;
    std::istringstream l(line.substr(at));
    std::string w, f, g;
    int it;
    double fence, getall;
    if (l >> w >> it >> f >> fence >> g >> getall) {
      n->fence.push_back(fence);
      n->getall.push_back(getall);
    }
  }
}

Numbers Trainlet(const fs::path& bin, const fs::path& self, int ranks, int iters) {
  Numbers n;
  char tmpl[] = "/tmp/rdzvb.XXXXXX";  // short: the agents' ipc socket paths must fit sun_path
  const fs::path dir = mkdtemp(tmpl);
  const std::string ctl = (bin / "trainletctl").string();
  int st = 0;
  std::string out = Run({ctl, "local", "up", "--agents", "8", "--dir", dir.string(), "--slots",
                         std::to_string(ranks / 8), "--timeout", "60"},
                        &st);
  if (st != 0) {
    n.error = "local up: " + out;
    return n;
  }
  const fs::path job = dir / "job.yaml";
  {
    std::ofstream y(job);
    y << "apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata:\n  name: rdzvbench\n"
      << "spec:\n  runtimeRef:\n    name: plain\n  trainer:\n    numNodes: 8\n"
      << "    numProcPerNode: " << ranks / 8 << "\n    command:\n      - " << self.string()
      << "\n      - driver\n      - --iters\n      - '" << iters << "'\n";
  }
  const std::string home = dir.string();
  out = Run({ctl, "--home", home, "apply", "-f", job.string()}, &st);
  if (st != 0) n.error = "apply: " + out;
  const auto deadline = Clock::now() + std::chrono::seconds(300);
  while (n.error.empty()) {
    out = Run({ctl, "--home", home, "logs", "rdzvbench", "--rank", "0"});
    if (out.find("RESULT done") != std::string::npos) break;
    if (out.find("driver:") != std::string::npos) n.error = out;
    const std::string phase = Run({ctl, "--home", home, "get", "trainjobs", "rdzvbench"});
    if (phase.find("Failed") != std::string::npos) {
      // The attempts and events say why; the 4,096-row rank table does not.
      std::istringstream d(Run({ctl, "--home", home, "describe", "trainjob", "rdzvbench"}));
      n.error = "the job failed:";
      for (std::string l; std::getline(d, l);) {
        if (l.find("ause") != std::string::npos || l.find("ailed") != std::string::npos) {
          if (l.size() > 2 && !std::isdigit(static_cast<unsigned char>(l[2]))) n.error += "\n" + l;
        }
      }
    }
    if (Clock::now() > deadline) n.error = "no result in 600 s: " + out;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  if (n.error.empty()) ParseIters(out, &n);
  Run({ctl, "--home", home, "delete", "trainjob", "rdzvbench", "--timeout", "120s"});
  Run({ctl, "local", "down", "--dir", home});
  std::error_code ec;
  fs::remove_all(dir, ec);
  return n;
}

Numbers TcpStore(const std::string& script, int ranks, int iters) {
  Numbers n;
  int st = 0;
  // get-all is N^2 round trips: it is timed for 16 readers (per rank, like the trainlet side),
  // and at most 3 iterations are run.
  const std::string out = Run({"timeout", "900", "/usr/bin/python3", script, std::to_string(ranks),
                               std::to_string(std::min(iters, 3)), "16"},
                              &st);
  ParseIters(out, &n);
  if (st != 0 || n.fence.empty()) n.error = out.substr(0, 400);
  return n;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> counts = {256, 1024, 4096};
  int iters = 7;
  bool tcpstore = true;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "driver") {
      for (int j = i + 1; j + 1 < argc; ++j) {
        if (std::string(argv[j]) == "--iters") iters = std::atoi(argv[j + 1]);
      }
      return Driver(iters);
    }
    if (a == "--iters" && i + 1 < argc) {
      iters = std::atoi(argv[++i]);
    } else if (a == "--ranks" && i + 1 < argc) {
      counts.clear();
      std::stringstream s(argv[++i]);
      std::string item;
      while (std::getline(s, item, ',')) counts.push_back(std::atoi(item.c_str()));
    } else if (a == "--no-tcpstore") {
      tcpstore = false;
    } else {
      std::cerr << "usage: " << argv[0] << " [--ranks 256,1024,4096] [--iters 7] [--no-tcpstore]\n";
      return 2;
    }
  }
  const fs::path self = fs::read_symlink("/proc/self/exe");
  const std::string script = TRAINLET_BENCH_TCPSTORE_SCRIPT;
  std::vector<std::string> rows;
  char line[512];
  std::snprintf(line, sizeof line, "| %6s | %14s | %14s | %7s | %16s | %16s | %7s |", "ranks",
                "trainlet ms", "TCPStore ms", "ratio", "trainlet get-all", "TCPStore get-all",
                "ratio");
  rows.push_back(line);
  rows.push_back(
      "| -----: | -------------: | -------------: | ------: | ---------------: | ---------------: "
      "| ------: |");
  for (int n : counts) {
    if (n % 8 != 0) {
      std::cerr << "--ranks: " << n << " is not a multiple of 8 agents\n";
      return 2;
    }
    std::cerr << "trainlet: " << n << " ranks on 8 agents...\n";
    Numbers t = Trainlet(self.parent_path(), self, n, iters);
    if (!t.error.empty()) std::cerr << "trainlet " << n << ": " << t.error << "\n";
    Numbers p;
    if (tcpstore) {
      std::cerr << "TCPStore: " << n << " clients...\n";
      p = TcpStore(script, n, iters);
      if (!p.error.empty()) std::cerr << "TCPStore " << n << ": " << p.error << "\n";
    }
    const double tf = Median(t.fence), tg = Median(t.getall);
    const double pf = Median(p.fence), pg = Median(p.getall);
    auto num = [](double v, const char* fmt) {
      char b[32] = "-";
      if (v >= 0) std::snprintf(b, sizeof b, fmt, v);
      return std::string(b);
    };
    std::snprintf(line, sizeof line, "| %6d | %14s | %14s | %7s | %16s | %16s | %7s |", n,
                  num(tf, "%.2f").c_str(), num(pf, "%.2f").c_str(),
                  num(tf > 0 && pf > 0 ? pf / tf : -1, "%.1fx").c_str(), num(tg, "%.4f").c_str(),
                  num(pg, "%.2f").c_str(), num(tg > 0 && pg > 0 ? pg / tg : -1, "%.0fx").c_str());
    rows.push_back(line);
    std::cerr << line << "\n";
  }
  std::cout
      << "\nput+fence (TCPStore: set + add/wait barrier) and get-all per rank, ms; medians of "
      << iters << " (trainlet) and " << std::min(iters, 3) << " (TCPStore) iterations\n";
  for (const auto& r : rows) std::cout << r << "\n";
  return 0;
}
