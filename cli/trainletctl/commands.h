// The trainletctl commands that talk to a coordinator. Each returns the process exit code and
// prints its own errors ("error: ..." on stderr).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace trainlet::cli {

struct CommonFlags {
  std::string home;    // --home; "" means $TRAINLET_HOME or ~/.trainlet
  std::string output;  // -o
  // -n/--namespace: the namespace of the trainjobs named or listed (kubectl's default: default).
  std::string ns = "default";
  bool all_namespaces = false;  // -A/--all-namespaces: list every namespace's trainjobs
  // --request-timeout, as kubectl's: how long one request waits for the coordinator's answer
  // in ms (0 keeps ClientConfig's 15 s). Waits a command asks for (wait --timeout) are apart.
  int64_t request_timeout_ms = 0;
};

// How `get trainjobs` pages through the list (GetJobsRequest.limit and continue_token), as
// kubectl's --limit and --chunk-size.
struct ListPaging {
  uint32_t limit = 0;         // show at most this many jobs; 0: every one
  uint32_t chunk_size = 500;  // jobs asked for per request; 0: all in one (may be too large)
};

int CmdGet(const CommonFlags& f, const std::string& kind, const std::string& name,
           const ListPaging& paging = {});
// `get KIND a b ...` (or KIND/a KIND/b): trainjobs (and Training Operator kinds), each asked for by
// name, and nodes, in one table; a name not found is said, the others shown, and 1 returned.
// Other kinds take one name at a time.
int CmdGetSeveral(const CommonFlags& f, const std::string& kind,
                  const std::vector<std::string>& names);
int CmdDescribe(const CommonFlags& f, const std::string& kind, const std::string& name);
// With `wait`, then waits on the same connection until every TrainJob the file created or
// configured is Complete (0) or one is Failed (1, with its reason); `timeout` "0" waits forever.
int CmdApply(const CommonFlags& f, const std::string& file, bool wait = false,
             const std::string& timeout = "0");
// `names`: one or more (kubectl's `delete trainjob a b`); with `kind` as KIND/NAME, each of them
// KIND/NAME too. `force`: removed without waiting for its ranks (DeleteJobRequest.force).
int CmdDelete(const CommonFlags& f, const std::string& kind, const std::vector<std::string>& names,
              bool wait, const std::string& timeout, bool force = false);
// `targets`: trainjob/NAME..., or trainjob NAME...; each waited for, within one `timeout`.
int CmdWait(const CommonFlags& f, const std::vector<std::string>& targets,
            const std::string& for_condition, const std::string& timeout);
// "60s", "2m", "1h", "500ms", "30" (seconds) -> milliseconds; -1 when malformed.
int64_t ParseDuration(const std::string& text);

}  // namespace trainlet::cli
