#include "agent/step/rank_identity.h"

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>

#include "agent/step/private_file.h"

namespace trainlet::step {
namespace {

std::optional<uint32_t> ParseId(const std::string& text) {
  if (text.empty() || text.size() > 10) return std::nullopt;
  uint64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v >= UINT32_MAX) return std::nullopt;
  return static_cast<uint32_t>(v);
}

bool AllDigits(const std::string& s) {
  return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
}

std::optional<Account> FromPasswd(const passwd* pw) {
  if (pw == nullptr) return std::nullopt;
  return Account{pw->pw_name, pw->pw_uid, pw->pw_gid};
}

// The user part of the agent's run_as ("nobody", "65534"); errors name the field.
Result<Account> AgentUser(const std::string& user, const AccountLookup& accounts) {
  if (user.empty()) return InvalidError("run_as: no user before ':'");
  if (AllDigits(user)) {
    const auto uid = ParseId(user);
    if (!uid) return InvalidError("run_as: '" + user + "' is not a uid");
    auto account = accounts.by_uid(*uid);
    if (!account) return InvalidError("run_as: uid " + user + " does not exist on this node");
    return *account;
  }
  auto account = accounts.by_name(user);
  if (!account) return InvalidError("run_as: user '" + user + "' does not exist on this node");
  return *account;
}

Result<gid_t> AgentGroup(const std::string& group, const AccountLookup& accounts) {
  if (AllDigits(group)) {
    if (const auto gid = ParseId(group)) return static_cast<gid_t>(*gid);
    return InvalidError("run_as: '" + group + "' is not a gid");
  }
  if (auto gid = accounts.group_by_name(group)) return *gid;
  return InvalidError("run_as: group '" + group + "' does not exist on this node");
}

Result<uint32_t> JobId(int64_t value, const char* field) {
  if (value < 0 || value >= int64_t{UINT32_MAX})
    return InvalidError(std::string(field) + ": " + std::to_string(value) + " is not a valid id");
  return static_cast<uint32_t>(value);
}

std::string Describe(const RankIdentity& id) {
  return id.name.empty() ? "uid " + std::to_string(id.uid)
                         : "'" + id.name + "' (uid " + std::to_string(id.uid) + ")";
}

}  // namespace

const AccountLookup& SystemAccounts() {
  static const AccountLookup lookup{
      [](const std::string& name) { return FromPasswd(getpwnam(name.c_str())); },
      [](uid_t uid) { return FromPasswd(getpwuid(uid)); },
      [](const std::string& name) -> std::optional<gid_t> {
        const group* g = getgrnam(name.c_str());
        if (g == nullptr) return std::nullopt;
        return g->gr_gid;
      },
      [](const Account& a) {
        int n = 64;
        std::vector<gid_t> groups(static_cast<size_t>(n));
        if (getgrouplist(a.name.c_str(), a.gid, groups.data(), &n) < 0) {
          groups.resize(static_cast<size_t>(n));
          if (getgrouplist(a.name.c_str(), a.gid, groups.data(), &n) < 0) n = 0;
        }
        groups.resize(static_cast<size_t>(n));
        if (groups.empty()) groups.push_back(a.gid);
        return groups;
      }};
  return lookup;
}

Result<std::optional<RankIdentity>> RankIdentity::Resolve(const RunAsRequest& request, uid_t euid,
                                                          const AccountLookup& accounts) {
  if (request.empty()) return std::optional<RankIdentity>();
  const std::string& spec = request.agent_run_as;
  const size_t colon = spec.find(':');
  const std::string agent_user = spec.substr(0, colon);
  RankIdentity id;
  Account account;
  if (request.job_run_as_user) {
    id.field = "securityContext.runAsUser";
    TRAINLET_ASSIGN_OR_RETURN(uint32_t uid,
                              JobId(*request.job_run_as_user, "securityContext.runAsUser"));
    auto found = accounts.by_uid(uid);
    if (!found) {
      return InvalidError("securityContext.runAsUser: uid " + std::to_string(uid) +
                          " does not exist on this node");
    }
    account = *found;
  } else if (!spec.empty()) {
    id.field = "run_as";
    TRAINLET_ASSIGN_OR_RETURN(account, AgentUser(agent_user, accounts));
  } else {
    id.field = "securityContext.runAsGroup";
    auto found = accounts.by_uid(euid);
    account = found ? *found : Account{"", euid, 0};
  }
  id.uid = account.uid;
  id.name = account.name;
  if (request.job_run_as_group) {
    TRAINLET_ASSIGN_OR_RETURN(uint32_t gid,
                              JobId(*request.job_run_as_group, "securityContext.runAsGroup"));
    id.gid = gid;
    id.groups = {id.gid};
  } else if (colon != std::string::npos && !request.job_run_as_user) {
    TRAINLET_ASSIGN_OR_RETURN(id.gid, AgentGroup(spec.substr(colon + 1), accounts));
    id.groups = {id.gid};
  } else {
    id.gid = account.gid;
    id.groups = accounts.groups_of(account);
  }
  // A job may not ask for root on a node whose operator said ranks run as someone else.
  if (id.uid == 0 && request.job_run_as_user && !spec.empty()) {
    TRAINLET_ASSIGN_OR_RETURN(Account agent_account, AgentUser(agent_user, accounts));
    if (agent_account.uid != 0) {
      return InvalidError(
          "securityContext.runAsUser: 0 (root) is refused: this node runs ranks as '" + agent_user +
          "' (agent run_as)");
    }
  }
  if (request.fs_group) {
    TRAINLET_ASSIGN_OR_RETURN(uint32_t fs_group,
                              JobId(*request.fs_group, "securityContext.fsGroup"));
    id.fs_group = fs_group;
    if (std::find(id.groups.begin(), id.groups.end(), fs_group) == id.groups.end())
      id.groups.push_back(fs_group);
  }
  if (euid != 0) {
    if (id.uid == euid && !request.job_run_as_group && colon == std::string::npos)
      return std::optional<RankIdentity>();  // already that user: nothing to switch
    return InvalidError(id.field + ": the agent runs as uid " + std::to_string(euid) +
                        ", not root, and cannot run ranks as " + Describe(id) +
                        "; unset it or run the agent as root");
  }
  if (id.uid == 0 && id.field == "run_as" && colon == std::string::npos)
    return std::optional<RankIdentity>();  // run_as: root is the default
  return std::optional<RankIdentity>(std::move(id));
}

std::string RankIdentity::Encode() const {
  std::string out = std::to_string(uid) + ":" + std::to_string(gid) + ":";
  for (size_t i = 0; i < groups.size(); ++i) {
    if (i > 0) out += ",";
    out += std::to_string(groups[i]);
  }
  return out;
}

std::string RankIdentity::Text() const {
  const std::string ids = "uid " + std::to_string(uid) + ", gid " + std::to_string(gid);
  return name.empty() ? ids : name + " (" + ids + ")";
}

std::string RankIdentity::TextOf(const RunAsRequest& request) {
  auto identity = Resolve(request, geteuid(), SystemAccounts());
  return identity.ok() && identity->has_value() ? (*identity)->Text() : "";
}

Result<RankIdentity> RankIdentity::Decode(const std::string& text) {
  const size_t a = text.find(':');
  const size_t b = a == std::string::npos ? a : text.find(':', a + 1);
  if (b == std::string::npos) return InvalidError("identity '" + text + "': not UID:GID:GROUPS");
  RankIdentity id;
  const auto uid = ParseId(text.substr(0, a));
  const auto gid = ParseId(text.substr(a + 1, b - a - 1));
  if (!uid || !gid) return InvalidError("identity '" + text + "': not UID:GID:GROUPS");
  id.uid = *uid;
  id.gid = *gid;
  std::string rest = text.substr(b + 1);
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    const auto g = ParseId(rest.substr(0, comma));
    if (!g) return InvalidError("identity '" + text + "': a group is not a number");
    id.groups.push_back(*g);
    rest = comma == std::string::npos ? "" : rest.substr(comma + 1);
  }
  return id;
}

std::vector<std::string> RunAsArgv(const std::string& self, const RankIdentity& identity,
                                   const std::string& env_file,
                                   const std::vector<std::string>& argv) {
  std::vector<std::string> out = {self, "--as", identity.Encode(), env_file, "--"};
  out.insert(out.end(), argv.begin(), argv.end());
  return out;
}

Status WriteEnvFile(const std::string& path, const std::vector<std::string>& envp) {
  std::string text;
  for (const std::string& kv : envp) {
    text += kv;
    text.push_back('\0');
  }
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return IoError("env file " + path + ": " + std::strerror(errno));
  return WriteNewFile(fd, path, text, "env file");
}

Result<std::vector<std::string>> TakeEnvFile(const std::string& path) {
  // As large as a launch file may be (step_launch.cpp): it holds one rank's share of it.
  auto read = ReadPrivateFile(path, 64u << 20, "env file", /*follow_links=*/false);
  if (!read.ok()) return read.status();
  unlink(path.c_str());
  const std::string& text = *read;
  std::vector<std::string> envp;
  for (size_t start = 0; start < text.size();) {
    const size_t end = text.find('\0', start);
    if (end == std::string::npos) return InvalidError("env file " + path + ": unterminated entry");
    envp.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return envp;
}

Status DropPrivileges(const RankIdentity& identity) {
  auto failed = [](const char* what) {
    return PermissionError(std::string(what) + ": " + std::strerror(errno));
  };
  if (setgroups(identity.groups.size(), identity.groups.data()) != 0) return failed("setgroups");
  if (setgid(identity.gid) != 0) return failed("setgid");
  if (setuid(identity.uid) != 0) return failed("setuid");
  if (getuid() != identity.uid || geteuid() != identity.uid || getgid() != identity.gid ||
      getegid() != identity.gid) {
    return PermissionError("the ids after setuid are not the ones asked");
  }
  if (identity.uid != 0 && setuid(0) == 0)
    return PermissionError("root could be taken back after setuid");
  // Nor through a setuid binary or file capabilities: execve grants no privilege from here on,
  // for the rank and everything it starts. Root keeps its setuid helpers (it needs none).
  if (identity.uid != 0 && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
    return failed("prctl(PR_SET_NO_NEW_PRIVS)");
  return Status::Ok();
}

bool NoNewPrivsFor(const RunAsRequest& request) {
  return !request.allow_privilege_escalation.value_or(false);
}

Result<bool> EnterNoNewPrivs(const std::vector<RunAsRequest>& ranks) {
  for (const RunAsRequest& r : ranks) {
    if (!NoNewPrivsFor(r)) return false;
  }
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
    return PermissionError(std::string("prctl(PR_SET_NO_NEW_PRIVS): ") + std::strerror(errno));
  }
  return true;
}

int RunAs(int argc, char** argv) {
  // argv: trainlet-step --as ID ENV_FILE -- prog args...
  if (argc < 6 || std::strcmp(argv[4], "--") != 0) {
    std::fprintf(stderr,
                 "usage: trainlet-step --as UID:GID:GROUPS ENV_FILE -- PROGRAM [ARGS...]\n");
    return 126;
  }
  char** prog = argv + 5;
  auto env = TakeEnvFile(argv[3]);
  auto identity = RankIdentity::Decode(argv[2]);
  Status dropped = !env.ok()       ? env.status()
                   : identity.ok() ? DropPrivileges(*identity)
                                   : identity.status();
  if (!dropped.ok()) {
    std::fprintf(stderr, "trainlet-step: not starting %s as %s: %s\n", prog[0], argv[2],
                 dropped.message().c_str());
    return 126;
  }
  // Only now, as the rank's user, does the rank's env (its PATH, its LD_*) take effect.
  std::vector<char*> envp;
  for (std::string& kv : *env) envp.push_back(kv.data());
  envp.push_back(nullptr);
  environ = envp.data();
  execvp(prog[0], prog);
  const int err = errno;
  std::fprintf(stderr, "trainlet-step: cannot execute %s as uid %u: %s\n", prog[0], identity->uid,
               std::strerror(err));
  return err == ENOENT ? 127 : 126;
}

}  // namespace trainlet::step
