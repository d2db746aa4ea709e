# Shared helpers for the integration tests. Each test sources this, calls `start_cluster`, and
# relies on the EXIT trap to stop exactly what it started (by PID, via `local down`).
set -euo pipefail

: "${TRAINLET_BIN:?TRAINLET_BIN must point at the bin directory of the build}"
: "${TRAINLET_SOURCE_DIR:?TRAINLET_SOURCE_DIR must point at the source tree}"
CTL="$TRAINLET_BIN/trainletctl"
FIXTURES="$TRAINLET_SOURCE_DIR/tests/fixtures"
KUBEFLOW="$TRAINLET_SOURCE_DIR/../shared/kubeflow-trainer"

WORK=$(mktemp -d /tmp/trainlet-it.XXXXXX)
export TRAINLET_HOME="$WORK/cluster"
EXTRA_PIDS=()

cleanup() {
  local rc=$?
  if [ -d "$TRAINLET_HOME/pids" ]; then
    "$CTL" local down --dir "$TRAINLET_HOME" --timeout 10 >/dev/null 2>&1 || true
  fi
  # Processes a test started itself (agents in namespaces, say): USR2 to agents, so they stop
  # their workers (TERM would leave them running for a next agent), KILL to etcd members (one
  # told to stop first hands its raft leadership on, which waits seconds for peers that are
  # stopping too; their data is thrown away), TERM to the rest, then KILL whatever is left.
  for pid in "${EXTRA_PIDS[@]:-}"; do
    [ -n "$pid" ] || continue
    case "$(cat "/proc/$pid/comm" 2>/dev/null)" in
      trainlet-agent) kill -USR2 "$pid" 2>/dev/null || true ;;
      etcd) kill -KILL "$pid" 2>/dev/null || true ;;
      *) kill -TERM "$pid" 2>/dev/null || true ;;
    esac
  done
  for pid in "${EXTRA_PIDS[@]:-}"; do
    [ -n "$pid" ] || continue
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  done
  if declare -F netns_cleanup >/dev/null; then netns_cleanup; fi
  if [ $rc -ne 0 ] && [ -d "$TRAINLET_HOME/logs" ]; then
    echo "---- daemon logs (test failed) ----"
    tail -n 30 "$TRAINLET_HOME"/logs/*.log || true
  fi
  rm -rf "$WORK"
  exit $rc
}
trap cleanup EXIT

log() { echo "[$(date +%H:%M:%S)] $*"; }
fail() { echo "FAIL: $*" >&2; exit 1; }

# start_cluster AGENTS [extra local-up flags...]
start_cluster() {
  local agents=$1; shift
  "$CTL" local up --agents "$agents" --dir "$TRAINLET_HOME" --heartbeat-ms 200 \
    --lost-timeout-ms 2000 "$@" > "$WORK/up.out"
  grep -qxF "export TRAINLET_HOME='$TRAINLET_HOME'" "$WORK/up.out" || fail "local up printed no export line"
}

# remember_coordinator: sets COORD_PID to the local cluster's coordinator and COORD_ARGS to its
# command line with the endpoints it bound in place of port 0, so that restart_coordinator can
# start it again where the agents and clients look for it. Call after start_cluster.
remember_coordinator() {
  COORD_PID=$(awk '{print $1}' "$TRAINLET_HOME/pids/coordinator.pid")
  mapfile -d '' COORD_ARGS < "/proc/$COORD_PID/cmdline"
  local eps="$TRAINLET_HOME/coordinator/endpoints.json" key ep i
  for key in agent operator exec; do
    ep=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2] + "_endpoint"])' "$eps" "$key")
    for i in "${!COORD_ARGS[@]}"; do
      [ "${COORD_ARGS[$i]}" = "--$key-listen" ] && COORD_ARGS[$((i + 1))]=$ep
    done
  done
  return 0
}
# restart_coordinator: starts COORD_ARGS again (the test has killed COORD_PID) and records the new
# pid, as COORD_PID and where `local down` finds it.
restart_coordinator() {
  setsid "${COORD_ARGS[@]}" >> "$TRAINLET_HOME/logs/coordinator.log" 2>&1 < /dev/null &
  COORD_PID=$!
  echo "$COORD_PID $(awk '{print $22}' "/proc/$COORD_PID/stat")" > "$TRAINLET_HOME/pids/coordinator.pid"
  log "coordinator restarted (pid $COORD_PID)"
}

# write_job NAME NODES PROCS SCRIPT -> path of a TrainJob file running `sh -c SCRIPT`
write_job() {
  local name=$1 nodes=$2 procs=$3 script=$4 file="$WORK/$1.yaml"
  {
    printf 'apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata:\n  name: %s\n' "$name"
    printf 'spec:\n  runtimeRef:\n    name: plain\n  trainer:\n'
    printf '    numNodes: %s\n    numProcPerNode: %s\n' "$nodes" "$procs"
    printf '    command:\n      - /bin/sh\n      - -c\n      - |\n'
    printf '%s\n' "$script" | sed 's/^/        /'
  } > "$file"
  echo "$file"
}

# assert_contains HAYSTACK NEEDLE WHAT
assert_contains() {
  case "$1" in *"$2"*) ;; *) fail "$3: expected to find '$2' in: $1" ;; esac
}

# True when PID was started by an agent of this test: agents give every process they start
# TRAINLET_WORK_DIR under their state dir, and this test's state dirs are all inside WORK. Other
# tests (another worktree's run of the same test, say) use the same job names and commands on
# this machine.
# grep -z reads the environment's NUL-separated entries as lines.
ours() {
  grep -qsz "^TRAINLET_WORK_DIR=$WORK/" "/proc/$1/environ"
}

# PIDs of this cluster's live processes whose environment says TRAINLET_JOB=$1 (the job's ranks
# and children). One grep reads every process's environment: a tr and a grep per process took
# seconds per call on a loaded machine, and samplers call this every 50 ms.
job_pids() {
  local job=$1 f p
  for f in $(grep -lsxz "TRAINLET_JOB=$job" /proc/[0-9]*/environ); do
    p=${f#/proc/} && p=${p%/environ}
    ours "$p" || continue
    # zombies are not alive
    if [ "$(awk '{print $3}' "/proc/$p/stat" 2>/dev/null)" != "Z" ]; then echo "$p"; fi
  done
}

# own_pgrep PGREP-ARGS...: pgrep's matches that this test's cluster started (see ours).
own_pgrep() {
  local pid
  for pid in $(pgrep "$@"); do ours "$pid" && echo "$pid"; done
  return 0
}

# live_orted: this test's orted processes that are alive. A killed orted whose parent died first
# is a zombie of init until init reaps it (without a child subreaper: the portable build, macOS);
# dead is what counts.
live_orted() {
  local pid
  for pid in $(own_pgrep -x orted); do
    ps -o stat= -p "$pid" 2>/dev/null | grep -qv '^Z' && echo "$pid"
  done
  return 0
}

# wait_for SECONDS CMD... : retries CMD until it succeeds
wait_for() {
  local deadline=$(( $(date +%s) + $1 )); shift
  until "$@" >/dev/null 2>&1; do
    [ "$(date +%s)" -lt "$deadline" ] || return 1
    sleep 0.1
  done
}

# retry_runtime_yaml NAME RESTARTS: a plain ClusterTrainingRuntime NAME whose failurePolicy allows
# RESTARTS restarts, as YAML on stdout.
retry_runtime_yaml() {
  printf 'apiVersion: trainer.kubeflow.org/v1alpha1\nkind: ClusterTrainingRuntime\nmetadata:\n  name: %s\nspec:\n  mlPolicy:\n    numNodes: 1\n  template:\n    spec:\n      failurePolicy:\n        maxRestarts: %s\n      replicatedJobs:\n        - name: node\n          template:\n            spec:\n              template:\n                spec:\n                  containers:\n                    - name: node\n' "$1" "$2"
}

# start_sleeper_pair JOB: applies a 2-node job of `/bin/sleep 300` on a plain runtime allowing 3
# restarts (plain-retry), waits until attempt 1 is Running, starts the attempt sampler on it, and
# sets VICTIM (the node of node rank 0), VICTIM_INDEX (its number) and VICTIM_PID (its rank's pid).
start_sleeper_pair() {
  local job=$1
  { retry_runtime_yaml plain-retry 3; echo "---"
    printf 'apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata:\n  name: %s\n' "$job"
    printf 'spec:\n  runtimeRef:\n    name: plain-retry\n  trainer:\n    numNodes: 2\n'
    printf '    command: ["/bin/sleep", "300"]\n'; } > "$WORK/$job.yaml"
  "$CTL" apply -f "$WORK/$job.yaml" >/dev/null
  wait_for 20 sh -c "'$CTL' get trainjobs $job | grep -qE 'Running +2 +2 +1 '" \
    || fail "$job never Running: $("$CTL" describe trainjob "$job")"
  start_attempt_sampler "$job"  # never two attempts alive at once
  VICTIM=$("$CTL" get trainjobs "$job" -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)["jobs"][0]["placement"][0])')
  VICTIM_INDEX=${VICTIM#node-}
  VICTIM_PID=$(rank_pid_on "$job" "$VICTIM")
}

# rank_pid_on JOB NODE: the pid of JOB's (first) rank on NODE.
rank_pid_on() {
  "$CTL" get trainjobs "$1" -o json | python3 -c '
import json, sys
job = json.load(sys.stdin)["jobs"][0]
print(next(r["pid"] for r in job["ranks"] if r["node"] == sys.argv[1]))' "$2"
}

# attempts_running JOB: the attempts (TRAINLET_ATTEMPT) that have a live rank of JOB, each
# followed by a space.
attempts_running() {
  local p
  for p in $(job_pids "$1"); do
    { tr '\0' '\n' < "/proc/$p/environ"; } 2>/dev/null | sed -n 's/^TRAINLET_ATTEMPT=//p'
  done | sort -u | tr '\n' ' '
}

# start_attempt_sampler JOB: every 50 ms, in the background, records in $WORK/violations any
# moment when ranks of two attempts of JOB are alive at once. Sets SAMPLER (its PID, also in
# EXTRA_PIDS); check_attempt_sampler stops it and fails the test on a violation.
start_attempt_sampler() {
  local job=$1
  ( while :; do
      a=$(attempts_running "$job")
      [ "$(wc -w <<<"$a")" -le 1 ] || echo "$(date +%s%N) attempts $a at once" >> "$WORK/violations"
      sleep 0.05
    done ) &
  SAMPLER=$!
  EXTRA_PIDS+=("$SAMPLER")
}
check_attempt_sampler() {
  kill "$SAMPLER" 2>/dev/null || true
  wait "$SAMPLER" 2>/dev/null || true
  if [ -s "$WORK/violations" ]; then
    fail "two attempts ran at once: $(head -3 "$WORK/violations")"
  fi
}
