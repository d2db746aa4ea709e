#include "trainletctl/rendezvous_command.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <string>

#include "common/rendezvous/snapshot_format.h"
#include "trainlet/rendezvous.h"
#include "trainletctl/commands.h"

namespace trainlet::cli {
namespace {

namespace fs = std::filesystem;

int Error(const Status& s) {
  std::cerr << "error: " << s.message() << "\n";
  return 1;
}

struct Handle {
  trainlet_rdzv* h = nullptr;
  ~Handle() { trainlet_rdzv_close(h); }
};

int Report(const char* what, int code, const trainlet_rdzv* h) {
  std::cerr << "error: rendezvous " << what << ": " << trainlet_rdzv_code_name(code) << ": "
            << trainlet_rdzv_last_error(h) << "\n";
  return code == TRAINLET_RDZV_TIMEOUT ? 2 : 1;
}

// $TRAINLET_WORK_DIR/.rendezvous/attempt-A/rank-R: the prefix of this rank's state files.
Result<std::string> RankStatePrefix() {
  for (const char* name : {"TRAINLET_WORK_DIR", "TRAINLET_ATTEMPT", "TRAINLET_RANK"}) {
    const char* v = std::getenv(name);
    if (v == nullptr || *v == '\0') {
      return InvalidError(std::string(name) + ": not set (run this from a rank trainlet started)");
    }
  }
  const fs::path dir = fs::path(std::getenv("TRAINLET_WORK_DIR")) / ".rendezvous" /
                       ("attempt-" + std::string(std::getenv("TRAINLET_ATTEMPT")));
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return IoError(dir.string() + ": " + ec.message());
  return (dir / ("rank-" + std::string(std::getenv("TRAINLET_RANK")))).string();
}

Result<std::map<std::string, std::string>> ReadPuts(const std::string& path) {
  std::map<std::string, std::string> puts;
  if (!fs::exists(path)) return puts;
  TRAINLET_ASSIGN_OR_RETURN(auto snap, rendezvous::MappedSnapshot::Open(path));
  for (size_t i = 0; i < snap.view().size(); ++i) {
    puts.emplace(snap.view().key(i), snap.view().value(i));
  }
  return puts;
}

uint64_t ReadFences(const std::string& path) {
  std::ifstream in(path);
  uint64_t n = 0;
  in >> n;
  return n;
}

int Put(const std::string& key, const std::string& value) {
  auto prefix = RankStatePrefix();
  if (!prefix.ok()) return Error(prefix.status());
  auto puts = ReadPuts(*prefix + ".puts");
  if (!puts.ok()) return Error(puts.status());
  if (key.empty() || key.size() > TRAINLET_RDZV_MAX_KEY || value.size() > TRAINLET_RDZV_MAX_VALUE) {
    return Error(InvalidError(
        "rendezvous put: the key must be 1 to 4096 bytes and the value at most 1 MiB"));
  }
  (*puts)[key] = value;
  if (Status s = rendezvous::WriteSnapshotFile(*prefix + ".puts", 0, *puts); !s.ok())
    return Error(s);
  return 0;
}

// Opens this rank's handle, resumed after the fences its earlier invocations completed.
int OpenResumed(const std::string& prefix, Handle& handle) {
  if (int rc = trainlet_rdzv_open(&handle.h); rc != TRAINLET_RDZV_OK)
    return Report("open", rc, handle.h);
  const uint64_t done = ReadFences(prefix + ".fences");
  if (int rc = trainlet_rdzv_resume(handle.h, done); rc != TRAINLET_RDZV_OK)
    return Report("open", rc, handle.h);
  return 0;
}

int TimeoutMs(const std::string& text, const char* what) {
  const int64_t ms = ParseDuration(text);
  if (ms < 0) {
    std::cerr << "error: rendezvous " << what << ": --timeout " << text << ": not a duration\n";
    return -2;
  }
  return ms == 0 ? -1 : static_cast<int>(std::min<int64_t>(ms, INT32_MAX));
}

int Fence(const std::string& timeout) {
  const int timeout_ms = TimeoutMs(timeout, "fence");
  if (timeout_ms == -2) return 1;
  auto prefix = RankStatePrefix();
  if (!prefix.ok()) return Error(prefix.status());
  auto puts = ReadPuts(*prefix + ".puts");
  if (!puts.ok()) return Error(puts.status());
  Handle handle;
  if (int rc = OpenResumed(*prefix, handle); rc != 0) return rc;
  for (const auto& [k, v] : *puts) {
    if (int rc = trainlet_rdzv_put(handle.h, k.c_str(), v.data(), v.size());
        rc != TRAINLET_RDZV_OK) {
      return Report("fence", rc, handle.h);
    }
  }
  if (int rc = trainlet_rdzv_fence(handle.h, timeout_ms); rc != TRAINLET_RDZV_OK) {
    return Report("fence", rc, handle.h);
  }
  // The fence took the puts; the count is what the next invocation resumes from.
  const std::string fences = *prefix + ".fences";
  {
    std::ofstream out(fences + ".tmp", std::ios::trunc);
    out << trainlet_rdzv_epoch(handle.h) << "\n";
    if (!out.flush()) return Error(IoError(fences + ".tmp: cannot write"));
  }
  std::error_code ec;
  fs::rename(fences + ".tmp", fences, ec);
  if (ec) return Error(IoError(fences + ": " + ec.message()));
  fs::remove(*prefix + ".puts", ec);
  return 0;
}

int Get(const std::string& key, const std::string& timeout) {
  const int timeout_ms = TimeoutMs(timeout, "get");
  if (timeout_ms == -2) return 1;
  auto prefix = RankStatePrefix();
  if (!prefix.ok()) return Error(prefix.status());
  auto puts = ReadPuts(*prefix + ".puts");
  if (!puts.ok()) return Error(puts.status());
  if (auto it = puts->find(key); it != puts->end()) {
    std::fwrite(it->second.data(), 1, it->second.size(), stdout);
    std::fputc('\n', stdout);
    return 0;
  }
  Handle handle;
  if (int rc = OpenResumed(*prefix, handle); rc != 0) return rc;
  std::string buf(64 << 10, '\0');
  size_t len = 0;
  int rc = trainlet_rdzv_get(handle.h, key.c_str(), buf.data(), buf.size(), &len, timeout_ms);
  if (rc == TRAINLET_RDZV_TOO_SMALL) {
    buf.resize(len);
    rc = trainlet_rdzv_get(handle.h, key.c_str(), buf.data(), buf.size(), &len, timeout_ms);
  }
  if (rc != TRAINLET_RDZV_OK) return Report("get", rc, handle.h);
  std::fwrite(buf.data(), 1, len, stdout);
  std::fputc('\n', stdout);
  return 0;
}

}  // namespace

void AddRendezvousCommand(CLI::App& app, int& rc) {
  auto* cmd = app.add_subcommand(
      "rendezvous",
      "Put, fence and get from inside a rank (a shell script), through the node's agent\n"
      "  trainletctl rendezvous put addr/$TRAINLET_RANK \"$(hostname -i):$PORT\"\n"
      "  trainletctl rendezvous fence --timeout 60s\n"
      "  trainletctl rendezvous get addr/0");
  cmd->require_subcommand(1);
  // CLI11 keeps pointers to these: they live as long as the app, like main's own locals.
  static std::string key, value, get_timeout = "30s", fence_timeout = "0";
  auto* put = cmd->add_subcommand(
      "put",
      "Store KEY=VALUE for this rank's next fence\n"
      "  trainletctl rendezvous put addr/$TRAINLET_RANK \"$(hostname -i):29500\"");
  put->add_option("key", key, "The key")->required();
  put->add_option("value", value, "The value")->required();
  put->callback([&rc] { rc = Put(key, value); });
  auto* get = cmd->add_subcommand(
      "get",
      "Print KEY's value; waits until a fence publishes it (exit 2 on timeout)\n"
      "  trainletctl rendezvous get addr/0 --timeout 60s");
  get->add_option("key", key, "The key")->required();
  get->add_option("--timeout", get_timeout, "e.g. 30s; 0 waits while the attempt lives")
      ->capture_default_str();
  get->callback([&rc] { rc = Get(key, get_timeout); });
  auto* fence = cmd->add_subcommand(
      "fence",
      "Send this rank's puts and wait until every rank of the attempt has fenced (exit 1 when a "
      "rank exited or the attempt ended, 2 on timeout)\n"
      "  trainletctl rendezvous fence --timeout 5m");
  fence->add_option("--timeout", fence_timeout, "e.g. 60s; 0 waits while the attempt lives")
      ->capture_default_str();
  fence->callback([&rc] { rc = Fence(fence_timeout); });
}

}  // namespace trainlet::cli
