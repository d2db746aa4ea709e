#include "agent/step/rank_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>

#include "agent/step/private_file.h"
#include "agent/step/spare_files.h"

namespace trainlet::step {
namespace {

constexpr char kWorkDirEnv[] = "TRAINLET_WORK_DIR";
constexpr char kCacheDirEnv[] = "TRAINLET_CACHE_DIR";
// A CA certificate or a token: far below this.
constexpr size_t kAgentFileMaxBytes = 1u << 20;

enum class Kind {
  kNone,
  kEnv,        // kSecretEnvNames: the value moves into a file, named by NAME_FILE
  kAgentFile,  // kAgentFileEnvNames, for a rank of another user: the file is copied
};

// The agent files (kAgentFileEnvNames) a rank of (TRAINLET_JOB, TRAINLET_ATTEMPT) may have
// copied, as "NAME=path": only the progress endpoint's own, where the agent writes them
// (ProgressCredentials::Locate: <state_dir>/progress/ca.crt; ProgressEndpoint::WriteTokenFile:
// <state_dir>/progress/tokens/<job>.attempt-<N>). A path a job set itself (the endpoint off) is
// never read as root: it could name the agent's key.
std::vector<std::string> AgentFiles(const std::vector<std::string>& envp,
                                    const std::string& state_dir) {
  const std::string dir = state_dir + "/progress";
  return {std::string(kAgentFileEnvNames[0]) + "=" + dir + "/ca.crt",
          std::string(kAgentFileEnvNames[1]) + "=" + dir + "/tokens/" +
              EnvValue(envp, "TRAINLET_JOB") + ".attempt-" + EnvValue(envp, "TRAINLET_ATTEMPT")};
}

Kind SecretKind(const std::string& kv, const std::vector<std::string>& agent_files) {
  for (const char* name : kSecretEnvNames) {
    const size_t n = std::strlen(name);
    if (kv.size() > n && kv.compare(0, n, name) == 0 && kv[n] == '=') return Kind::kEnv;
  }
  const bool listed = std::find(agent_files.begin(), agent_files.end(), kv) != agent_files.end();
  return listed ? Kind::kAgentFile : Kind::kNone;
}

std::string Errno(const std::string& what) { return what + ": " + std::strerror(errno); }

// Opens `name` under `parent_fd` as a directory, never through a symlink.
int OpenDirAt(int parent_fd, const std::string& name) {
  return openat(parent_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

// Whether `st` lets `who` search (traverse) it.
bool Searchable(const struct stat& st, const RankIdentity& who) {
  if (who.uid == 0) return true;
  if (st.st_uid == who.uid) return (st.st_mode & S_IXUSR) != 0;
  const bool in_group = st.st_gid == who.gid || std::find(who.groups.begin(), who.groups.end(),
                                                          st.st_gid) != who.groups.end();
  if (in_group) return (st.st_mode & S_IXGRP) != 0;
  return (st.st_mode & S_IXOTH) != 0;
}

std::string Mode(mode_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(mode & 07777));
  return buf;
}

// Every ancestor of `work_dir` must be searchable by `owner`; the agent's own ones (at or below
// `state_dir`) are opened up to o+x when they are not.
Status OpenPathTo(const std::string& work_dir, const std::string& state_dir,
                  const RankIdentity& owner) {
  for (size_t slash = work_dir.find('/', 1); slash != std::string::npos;
       slash = work_dir.find('/', slash + 1)) {
    const std::string dir = work_dir.substr(0, slash);
    struct stat st {};
    if (stat(dir.c_str(), &st) != 0) return IoError(owner.field + ": " + Errno(dir));
    if (Searchable(st, owner)) continue;
    const bool agents = !state_dir.empty() &&
                        (dir == state_dir || dir.rfind(state_dir + "/", 0) == 0) &&
                        st.st_uid == geteuid();
    if (agents && chmod(dir.c_str(), (st.st_mode & 07777) | S_IXUSR | S_IXGRP | S_IXOTH) == 0)
      continue;
    return PermissionError(owner.field + ": uid " + std::to_string(owner.uid) +
                           " cannot reach its work dir " + work_dir + ": " + dir + " (mode " +
                           Mode(st.st_mode) + ", owner " + std::to_string(st.st_uid) +
                           ") is not searchable by it; allow it with chmod o+x");
  }
  return Status::Ok();
}

Status Give(int fd, const std::string& path, const RankIdentity& owner) {
  if (fchown(fd, owner.uid, owner.gid) != 0 || fchmod(fd, 0700) != 0)
    return IoError(owner.field + ": " + Errno("chown " + path));
  return Status::Ok();
}

// A job dir shared through the owner's fsGroup: the step's, group fsGroup, 2770 (setgid: what
// the ranks make in it takes the group too), as Kubernetes gives a pod's volumes to its fsGroup.
// The work dir itself also gets the sticky bit (3770), as /tmp has: it holds .trainlet-secrets,
// the step's, and with write access alone any member of the group could rename that away and
// plant a dir of its own where another user's rank looks for its token.
Status Share(int fd, const std::string& path, const RankIdentity& owner, bool top) {
  if (fchown(fd, geteuid(), *owner.fs_group) != 0 || fchmod(fd, top ? 03770 : 02770) != 0)
    return IoError("securityContext.fsGroup: " + Errno("chown " + path));
  return Status::Ok();
}

// The owner's job dir: shared through its fsGroup when it has one, else its own. `top`: the
// work dir itself, not one under it.
Status GiveJobDir(int fd, const std::string& path, const RankIdentity& owner, bool top = false) {
  return owner.fs_group ? Share(fd, path, owner, top) : Give(fd, path, owner);
}

// Makes `name` under `dir_fd` a hard link to the open file `fd`, replacing a file of that name
// (one a step of the same pid left). False when it cannot (no /proc, a file whose every name is
// gone): the caller writes a file of its own. By the descriptor itself where the step may
// (AT_EMPTY_PATH needs CAP_DAC_READ_SEARCH, which root has), else through /proc/self/fd.
bool LinkTo(int fd, int dir_fd, const std::string& name) {
#ifdef __linux__
  const std::string self = "/proc/self/fd/" + std::to_string(fd);
  for (int tries = 0; tries < 2; ++tries) {
    if (linkat(fd, "", dir_fd, name.c_str(), AT_EMPTY_PATH) == 0) return true;
    if (errno != EEXIST &&
        linkat(AT_FDCWD, self.c_str(), dir_fd, name.c_str(), AT_SYMLINK_FOLLOW) == 0)
      return true;
    if (errno != EEXIST) return false;
    unlinkat(dir_fd, name.c_str(), 0);
  }
  return false;
#else
  (void)fd, (void)dir_fd, (void)name;
  return false;
#endif
}

// A new 0400 file `name` under `dir_fd` holding `value`, owned by uid:gid; its descriptor, or -1
// (errno set). A spare file (empty, 0600, the step's user) renamed there when `spares` has one:
// it is written through the descriptor opened before the rename, never through `name`.
int WriteSecretFile(int dir_fd, const std::string& name, const std::string& value, uid_t uid,
                    gid_t gid, SpareFiles* spares) {
  constexpr int kFlags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
  int fd = spares != nullptr ? spares->TakeOpenAt(dir_fd, name) : -1;
  if (fd >= 0) {
    if (fchmod(fd, 0400) == 0 &&
        write(fd, value.data(), value.size()) == static_cast<ssize_t>(value.size()) &&
        fchown(fd, uid, gid) == 0) {
      return fd;
    }
    const int saved = errno;
    close(fd);
    errno = saved;
    return -1;
  }
  fd = openat(dir_fd, name.c_str(), kFlags, 0400);
  if (fd < 0 && errno == EEXIST) {  // left by a step of the same pid: replaced, never written to
    unlinkat(dir_fd, name.c_str(), 0);
    fd = openat(dir_fd, name.c_str(), kFlags, 0400);
  }
  if (fd < 0) return -1;
  if (write(fd, value.data(), value.size()) == static_cast<ssize_t>(value.size()) &&
      fchown(fd, uid, gid) == 0 && fchmod(fd, 0400) == 0) {
    return fd;
  }
  const int saved = errno;
  close(fd);
  errno = saved;
  return -1;
}

// `name` under `parent_fd`, made (0700) if need be, opened as a directory without following a
// link, and given to uid:gid with `mode`; its descriptor, or an error naming `path`.
Result<int> ReadyDirAt(int parent_fd, const std::string& name, const std::string& path, uid_t uid,
                       gid_t gid, mode_t mode, SpareFiles* spares) {
  // A spare dir (empty, 0700, the step's user) where one waits and nothing stands there yet.
  const bool spare = spares != nullptr && spares->TakeDirAt(parent_fd, name);
  if (!spare && mkdirat(parent_fd, name.c_str(), 0700) != 0 && errno != EEXIST)
    return IoError("secret files: " + Errno(path));
  const int fd = OpenDirAt(parent_fd, name);
  if (fd < 0) return IoError("secret files: " + Errno(path));
  if (fchown(fd, uid, gid) != 0 || fchmod(fd, mode) != 0) {
    const Status st = IoError("secret files: " + Errno("chown " + path));
    close(fd);
    return st;
  }
  return fd;
}

// The secrets dir of uid:gid under `work_dir`, <work_dir>/.trainlet-secrets/uid-<UID>: the
// secrets dir itself the step's (0711: each user reaches its own dir, lists none), the user's dir
// its own (0700). Made if need be, never through a link; the user's dir's descriptor, or an error
// naming the dir.
Result<int> OpenSecretsDir(const std::string& work_dir, uid_t uid, gid_t gid, SpareFiles* spares) {
  const std::string top = work_dir + "/" + kSecretsDirName;
  auto top_fd = OpenStepSecretsDir(work_dir, spares);
  if (!top_fd.ok()) return top_fd.status();
  const std::string name = UserSecretsDirName(uid);
  auto fd = ReadyDirAt(*top_fd, name, top + "/" + name, uid, gid, 0700, spares);
  close(*top_fd);
  return fd;
}

}  // namespace

SecretFileLinks::~SecretFileLinks() {
  for (const auto& [key, fd] : fds_) close(fd);
  for (const auto& [dir, ready] : dirs_) close(ready.fd);
}

int SecretFileLinks::FindDir(const std::string& dir, uid_t uid, gid_t gid) const {
  auto it = dirs_.find(dir);
  return it == dirs_.end() || it->second.uid != uid || it->second.gid != gid ? -1 : it->second.fd;
}

void SecretFileLinks::KeepDir(const std::string& dir, uid_t uid, gid_t gid, int fd) {
  auto [it, added] = dirs_.try_emplace(dir, ReadyDir{uid, gid, fd});
  if (!added) {
    close(it->second.fd);
    it->second = ReadyDir{uid, gid, fd};
  }
}

int SecretFileLinks::Find(const std::string& dir, const std::string& name, const std::string& value,
                          uid_t uid, gid_t gid) const {
  auto it = fds_.find(Key{dir, name, value, uid, gid});
  return it == fds_.end() ? -1 : it->second;
}

void SecretFileLinks::Keep(const std::string& dir, const std::string& name,
                           const std::string& value, uid_t uid, gid_t gid, int fd) {
  auto [it, added] = fds_.try_emplace(Key{dir, name, value, uid, gid}, fd);
  if (!added) {
    close(it->second);
    it->second = fd;
  }
}

std::string UserSecretsDirName(uid_t uid) { return "uid-" + std::to_string(uid); }

Result<int> OpenStepSecretsDir(const std::string& work_dir, SpareFiles* spares) {
  const int work_fd = open(work_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (work_fd < 0) return IoError("secret files: " + Errno(work_dir));
  // Whatever stands there (a dir a rank made, or an older agent's, which gave it to the rank's
  // user) is opened as it is, then held: from here on it is the step's, and no rank can write in
  // it, replace what the step made in it, or list it.
  auto fd = ReadyDirAt(work_fd, kSecretsDirName, work_dir + "/" + kSecretsDirName, geteuid(),
                       getegid(), 0711, spares);
  close(work_fd);
  return fd;
}

std::string EnvValue(const std::vector<std::string>& envp, const std::string& key) {
  const std::string prefix = key + "=";
  for (const std::string& kv : envp) {
    if (kv.rfind(prefix, 0) == 0) return kv.substr(prefix.size());
  }
  return "";
}

Result<std::vector<std::string>> MoveSecretsToFiles(std::vector<std::string>& envp,
                                                    const std::string& tag,
                                                    const std::optional<RankIdentity>& owner,
                                                    const std::string& state_dir,
                                                    SecretFileLinks* links) {
  std::vector<std::string> written;
  const std::vector<std::string> agent_files =
      owner && !state_dir.empty() ? AgentFiles(envp, state_dir) : std::vector<std::string>{};
  const bool any = std::any_of(envp.begin(), envp.end(), [&](const std::string& kv) {
    return SecretKind(kv, agent_files) != Kind::kNone;
  });
  if (!any) return written;
  const std::string work_dir = EnvValue(envp, kWorkDirEnv);
  if (work_dir.empty() || work_dir[0] != '/')
    return InvalidError("secret files: the rank has no TRAINLET_WORK_DIR to keep them in");
  const uid_t uid = owner ? owner->uid : geteuid();
  const gid_t gid = owner ? owner->gid : getegid();
  const std::string dir = work_dir + "/" + kSecretsDirName + "/" + UserSecretsDirName(uid);
  // Made ready once per step for each work dir and user (SecretFileLinks), else for this call.
  int dir_fd = links != nullptr ? links->FindDir(dir, uid, gid) : -1;
  if (dir_fd < 0) {
    TRAINLET_ASSIGN_OR_RETURN(
        dir_fd, OpenSecretsDir(work_dir, uid, gid, links != nullptr ? links->spares() : nullptr));
    if (links != nullptr) links->KeepDir(dir, uid, gid, dir_fd);
  }
  // No copy of the env: the secrets' entries are found, then dropped in place with the
  // NAME_FILE entries ours replace (this runs once per rank on the launch's path).
  Status st = Status::Ok();
  std::vector<std::string> ours;
  std::vector<size_t> moved;  // indices of the secrets' entries in envp
  for (size_t i = 0; i < envp.size() && st.ok(); ++i) {
    const std::string& kv = envp[i];
    const Kind kind = SecretKind(kv, agent_files);
    if (kind == Kind::kNone) continue;
    moved.push_back(i);
    const std::string key = kv.substr(0, kv.find('='));
    const std::string name = tag + "." + key;
    const std::string path = dir + "/" + name;
    std::string value = kv.substr(key.size() + 1);
    if (kind == Kind::kAgentFile) {
      // The agent's file, read as root: the rank gets its own copy under the same variable.
      auto content = ReadPrivateFile(value, kAgentFileMaxBytes, "secret files: " + key,
                                     /*follow_links=*/false);
      if (!content.ok()) {
        st = content.status();
        continue;
      }
      value = std::move(*content);
    }
    const int same = links != nullptr ? links->Find(dir, key, value, uid, gid) : -1;
    if (same < 0 || !LinkTo(same, dir_fd, name)) {
      const int fd = WriteSecretFile(dir_fd, name, value, uid, gid,
                                     links != nullptr ? links->spares() : nullptr);
      if (fd < 0) {
        st = IoError("secret files: " + Errno(path));
      } else if (links != nullptr) {
        links->Keep(dir, key, value, uid, gid, fd);
      } else {
        close(fd);
      }
    }
    written.push_back(path);
    ours.push_back(key + (kind == Kind::kEnv ? kSecretFileSuffix : "") + "=" + path);
  }
  if (links == nullptr) close(dir_fd);
  if (!st.ok()) {
    RemoveSecretFiles(written);
    return st;
  }
  // A NAME_FILE the rank's own env set would name another file: ours replace it.
  size_t out = 0, next = 0;
  for (size_t i = 0; i < envp.size(); ++i) {
    if (next < moved.size() && moved[next] == i) {
      ++next;
      continue;
    }
    const std::string_view kv = envp[i];
    const std::string_view key = kv.substr(0, kv.find('=') + 1);  // with its '='
    const bool replaced = std::any_of(ours.begin(), ours.end(),
                                      [&](const std::string& o) { return o.starts_with(key); });
    if (replaced) continue;
    if (out != i) envp[out] = std::move(envp[i]);
    ++out;
  }
  envp.resize(out);
  envp.insert(envp.end(), ours.begin(), ours.end());
  return written;
}

void RemoveSecretFiles(const std::vector<std::string>& paths) {
  for (const std::string& p : paths) unlink(p.c_str());
}

Status GiveJobDirs(const std::string& work_dir, const std::string& state_dir,
                   const RankIdentity& owner) {
  if (work_dir.empty() || work_dir[0] != '/') return Status::Ok();
  TRAINLET_RETURN_IF_ERROR(OpenPathTo(work_dir, state_dir, owner));
  const int work_fd = open(work_dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (work_fd < 0) return IoError(owner.field + ": " + Errno(work_dir));
  Status st = GiveJobDir(work_fd, work_dir, owner, /*top=*/true);
  const int ws_fd = st.ok() ? OpenDirAt(work_fd, "workspace") : -1;
  close(work_fd);
  if (ws_fd < 0) return st;  // no workspace (an agent before it): nothing more to give
  st = GiveJobDir(ws_fd, work_dir + "/workspace", owner);
  for (const char* sub : {"dataset", "model"}) {
    const int fd = st.ok() ? OpenDirAt(ws_fd, sub) : -1;
    if (fd < 0) continue;
    st = GiveJobDir(fd, work_dir + "/workspace/" + sub, owner);
    close(fd);
  }
  close(ws_fd);
  return st;
}

Status GiveNodeCache(std::vector<std::string>& envp, const std::string& state_dir,
                     const RankIdentity& owner) {
  const std::string cache = EnvValue(envp, kCacheDirEnv);
  // Only the agent's own cache dir: root never opens up a dir a job named.
  if (state_dir.empty() || cache != state_dir + "/cache") return Status::Ok();
  const int cache_fd = open(cache.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (cache_fd < 0) return IoError(owner.field + ": node cache " + Errno(cache));
  // Searchable, not listable: a user finds its own dir, never another's names.
  Status st = fchmod(cache_fd, 0711) == 0 ? Status::Ok()
                                          : IoError(owner.field + ": " + Errno("chmod " + cache));
  const std::string name = "uid-" + std::to_string(owner.uid);
  const std::string mine = cache + "/" + name;
  if (st.ok() && mkdirat(cache_fd, name.c_str(), 0700) != 0 && errno != EEXIST)
    st = IoError(owner.field + ": node cache " + Errno(mine));
  const int fd = st.ok() ? OpenDirAt(cache_fd, name) : -1;
  if (st.ok() && fd < 0) st = IoError(owner.field + ": node cache " + Errno(mine));
  close(cache_fd);
  if (!st.ok()) return st;
  st = Give(fd, mine, owner);
  close(fd);
  if (!st.ok()) return st;
  for (std::string& kv : envp) {
    if (kv.rfind(std::string(kCacheDirEnv) + "=", 0) == 0)
      kv = std::string(kCacheDirEnv) + "=" + mine;
  }
  return Status::Ok();
}

}  // namespace trainlet::step
