// What trainlet-step prepares, as root, for a rank before the rank drops to its own user
// (rank_identity.h): the rank's secret files and the ownership of its job's dirs.
//
// Secrets. The per-attempt credentials a rank gets (the launcher key TRAINLET_EXEC_KEY and the
// rendezvous token TRAINLET_RENDEZVOUS_TOKEN) are never left in its env, where any process of the
// same user reads them from /proc/<pid>/environ, where `ps e` shows them and where every child
// inherits them. MoveSecretsToFiles writes each into a 0400 file of the rank's user in that
// user's own secrets dir, <TRAINLET_WORK_DIR>/.trainlet-secrets/uid-<UID> (0700, the user's), and
// puts NAME_FILE=<path> in the env instead. .trainlet-secrets itself is the step's (0711): ranks
// of several users share a work dir (fsGroup, below), and each reaches its own dir there, never
// another user's, and lists none. Readers take either (common/secret_env.h).
// KUBEFLOW_TRAINER_SERVER_TOKEN stays in the env: Kubeflow's own clients read it from there, and
// it is scoped by HMAC to one job attempt's progress only.
//
// Agent files. The progress endpoint's CA certificate and the attempt's progress token (issue 15:
// KUBEFLOW_TRAINER_SERVER_CA_CERT and KUBEFLOW_TRAINER_SERVER_TOKEN, each a path) are the agent's,
// in its 0700 state dir, where a rank of another user cannot open them. For such a rank they are
// copied into the same secrets dir (0400, the rank user's) and the variable names the copy: the
// job's user reads them, no other user does. The progress dir stays 0700.
//
// Ownership. GiveJobDirs hands the job's work dir and workspace (dataset/, model/) to the rank's
// user (0700), or, when the rank's pod sets securityContext.fsGroup, to that group: the dirs are
// then the step's, group fsGroup, mode 2770 (setgid), and every rank of the job with that
// supplementary group (RankIdentity::Resolve gives it) reads and writes them, whoever it runs as,
// as Kubernetes shares a pod's volumes. Which users may hold a work dir at once is WorkDirUsers'
// rule (work_dir_users.h). GiveJobDirs also makes the dirs between the agent's state dir and the
// work dir searchable (0711: no listing) so that the rank can reach its work dir by path. A dir
// above the state dir that the user cannot search is an error naming it: the operator must open
// it (chmod o+x).
//
// The node cache. Its dir is shared by the node's jobs; a rank of another user gets a dir of its
// own in it (GiveNodeCache), so one user's cached files are never another's to read.
//
// Every path under a dir a rank user owns is opened with O_NOFOLLOW relative to its parent's
// descriptor, so a rank cannot turn root's writes or chowns elsewhere with a symlink.
//
// Plain libc; call from trainlet-step's single thread.
#pragma once

#include <sys/types.h>

#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "agent/step/rank_identity.h"
#include "common/status.h"

namespace trainlet::step {

class SpareFiles;

// The secret files one step has written, each kept open, so that a later rank that gets the same
// secret as the same user gets a hard link to that file instead of a new one: a name of its own
// (removed on its own, as before) without an inode to allocate. Every rank of a step normally
// carries the attempt's one rendezvous token, and allocating an inode is most of what a file
// costs (on ext4 after many deletes, about as much as spawning the rank). Linux only (the link is
// made through /proc/self/fd); elsewhere, and whenever a link fails, a new file is written.
// It also keeps each secrets dir it has made ready (made, opened without following links, given
// to its user): the next rank of the same work dir and user writes into the open dir, without the
// eight calls (open, mkdir, open, chown, chmod ...) that preparing it again takes.
// The descriptors are close-on-exec. Owned by the step; plain libc, its single thread.
class SecretFileLinks {
 public:
  SecretFileLinks() = default;
  SecretFileLinks(const SecretFileLinks&) = delete;
  SecretFileLinks& operator=(const SecretFileLinks&) = delete;
  ~SecretFileLinks();  // closes the descriptors; the files stay

  // The open file in `dir` that holds `value` for the variable `name`, owned by uid:gid; -1 when
  // none was kept.
  int Find(const std::string& dir, const std::string& name, const std::string& value, uid_t uid,
           gid_t gid) const;
  // Keeps `fd` (taken over) as that file; a second file for the same key closes the first.
  void Keep(const std::string& dir, const std::string& name, const std::string& value, uid_t uid,
            gid_t gid, int fd);
  size_t size() const { return fds_.size(); }

  // The secrets dir `dir` made ready for uid:gid before (KeepDir), or -1.
  int FindDir(const std::string& dir, uid_t uid, gid_t gid) const;
  // Keeps `fd` (taken over) as `dir`, ready for uid:gid; it replaces what was kept for `dir`.
  void KeepDir(const std::string& dir, uid_t uid, gid_t gid, int fd);

  // Where a new secret file or secrets dir is taken from (spare_files.h): a rename instead of an
  // inode allocation, on the first rank's path; null (the default): made as before.
  void UseSpares(SpareFiles* spares) { spares_ = spares; }
  SpareFiles* spares() const { return spares_; }

 private:
  using Key = std::tuple<std::string, std::string, std::string, uid_t, gid_t>;
  std::map<Key, int> fds_;
  struct ReadyDir {
    uid_t uid;
    gid_t gid;
    int fd;
  };
  std::map<std::string, ReadyDir> dirs_;
  SpareFiles* spares_ = nullptr;
};

// The env variables moved into files, and the suffix of the variable that names the file.
inline constexpr const char* kSecretEnvNames[] = {"TRAINLET_EXEC_KEY", "TRAINLET_RENDEZVOUS_TOKEN"};
inline constexpr char kSecretFileSuffix[] = "_FILE";
// Paths to the agent's files that a rank of another user gets its own copy of (see above).
inline constexpr const char* kAgentFileEnvNames[] = {"KUBEFLOW_TRAINER_SERVER_CA_CERT",
                                                     "KUBEFLOW_TRAINER_SERVER_TOKEN"};
inline constexpr char kSecretsDirName[] = ".trainlet-secrets";
// The name of a user's own dir in it: "uid-<UID>".
std::string UserSecretsDirName(uid_t uid);
// <work_dir>/.trainlet-secrets, made if need be (from a spare dir when `spares` has one), opened
// without following a link and made the step's (0711); its descriptor (close-on-exec), or an error
// (Io) naming it.
Result<int> OpenStepSecretsDir(const std::string& work_dir, SpareFiles* spares = nullptr);

// In `envp` ("K=V", as the rank will get it): each secret variable set there is written to
// <TRAINLET_WORK_DIR>/.trainlet-secrets/uid-<UID>/<tag>.<NAME> (created 0400, owned by `owner`,
// or by the step's user when nullopt) and replaced by NAME_FILE=<path>. With an `owner` and the
// agent's `state_dir`, each agent file (kAgentFileEnvNames) whose variable names the progress
// endpoint's own file for this rank's job and attempt is copied to the same place, and the variable
// names the copy; one that cannot be read is an error (Io or NotFound, naming it). Other paths in
// those variables are left alone: root never reads a file a job named. `tag` makes the names of one
// process unique on the node (the step's pid and the rank). Returns the paths written, for
// RemoveSecretFiles. An envp without secrets is left as is; one with secrets but without
// TRAINLET_WORK_DIR is an error (Invalid), as is a file that cannot be written (Io, naming it):
// the rank must then not start, rather than start with its secret in the env. With `links`, a
// file is a hard link to one written before for the same secret and owner where it can be, and
// the files written are kept there for the next call.
Result<std::vector<std::string>> MoveSecretsToFiles(std::vector<std::string>& envp,
                                                    const std::string& tag,
                                                    const std::optional<RankIdentity>& owner,
                                                    const std::string& state_dir = "",
                                                    SecretFileLinks* links = nullptr);

// Best effort: the step's ranks are gone, their secrets with them.
void RemoveSecretFiles(const std::vector<std::string>& paths);

// See above. `work_dir` is the rank's TRAINLET_WORK_DIR; `state_dir` the agent's ("" when
// unknown: no dir is opened up, each is only checked). Errors (Permission/Io) name the dir and
// the field the identity came from.
Status GiveJobDirs(const std::string& work_dir, const std::string& state_dir,
                   const RankIdentity& owner);

// The node cache (TRAINLET_CACHE_DIR: <state_dir>/cache, which the agent makes 0700) for a rank
// of `owner`: its own <cache>/uid-<UID> (0700, the user's), shared by that user's jobs on the node
// and by no other user, with the cache dir itself made 0711 (searchable, not listable). The
// variable then names the user's dir. A TRAINLET_CACHE_DIR that is not the agent's cache dir
// (none, or one a job set), or no `state_dir`: nothing is done. Errors (Io) name the dir and the
// field the identity came from.
Status GiveNodeCache(std::vector<std::string>& envp, const std::string& state_dir,
                     const RankIdentity& owner);

// The value of `key` in `envp`, "" when absent.
std::string EnvValue(const std::vector<std::string>& envp, const std::string& key);

}  // namespace trainlet::step
