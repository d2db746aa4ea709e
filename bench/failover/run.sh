#!/usr/bin/env bash
# bench/failover: how fast trainlet notices and recovers, with the daemons' default timings
# (heartbeat 1 s, Lost after 3 s, first restart after 250 ms), over N trials each:
#   node death   an agent is killed with SIGKILL; time until `trainletctl get nodes` says Lost
#   gang restart a rank of a 2-node x 2-rank job is killed with SIGKILL; time until every rank
#                of the next attempt is Running (started, pid reported)
#   re-register  the coordinator, with S simulated agents connected (trainlet-sim-agents: real
#                CURVE clients speaking the agent protocol, no workers), is killed with SIGKILL
#                and started again on the same state dir and port; time from the new process's
#                start until every simulated agent has had its registration accepted
# Prints the median and the maximum of each, beside the targets and the published defaults of
# Kubernetes (node-monitor-grace-period 40 s, plus the pod eviction that follows) and Slurm
# (SlurmdTimeout 300 s). Node death is timed by the coordinator's own clock (the Lost transition's
# time in `get nodes -o json`); the other two are read by polling trainletctl (each poll costs
# ~10 ms), so they are upper bounds.
#
# With --etcd: coordinators in high availability on etcd instead (bench/failover/etcd.sh: leader
# SIGKILL -> apply accepted again, and -> S agents re-registered; apply latency etcd vs SQLite).
#
# usage: bench/failover/run.sh [--etcd] [--trials N] [--sim-agents S] [--bin BUILD/bin]
#   --trials N      trials of each measurement (default 20)
#   --sim-agents S  simulated agents for the re-register trial (default 1000)
#   --bin DIR       the build's bin directory (default $TRAINLET_BIN, else <repo>/build/bin)
# Not a ctest test.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
TRIALS=20
SIM=1000
BIN_DIR=${TRAINLET_BIN:-$SRC/build/bin}
for a in "$@"; do [ "$a" = --etcd ] && exec "$HERE/etcd.sh" "$@"; done
while [ $# -gt 0 ]; do
  case "$1" in
    --trials) TRIALS=${2:?--trials needs a number}; shift 2 ;;
    --sim-agents) SIM=${2:?--sim-agents needs a number}; shift 2 ;;
    --bin) BIN_DIR=${2:?--bin needs a directory}; shift 2 ;;
    -h|--help) sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
done
for v in TRIALS SIM; do
  case "${!v}" in ''|*[!0-9]*|0) echo "--${v,,}: must be a positive integer" >&2; exit 2 ;; esac
done
BIN_DIR=$(cd "$BIN_DIR" 2>/dev/null && pwd) || { echo "--bin: no such directory" >&2; exit 2; }
for b in trainletctl trainlet-agent trainlet-coordinator trainlet-sim-agents; do
  [ -x "$BIN_DIR/$b" ] || { echo "$BIN_DIR/$b not built" >&2; exit 2; }
done
export TRAINLET_BIN=$BIN_DIR TRAINLET_SOURCE_DIR=$SRC
# lib.sh: WORK, CTL, wait_for, EXTRA_PIDS and the EXIT trap that stops exactly those PIDs.
source "$SRC/tests/integration/lib.sh"

now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
KEYS="$TRAINLET_HOME/keys"
mkdir -p "$KEYS" "$TRAINLET_HOME/logs"
"$CTL" keys create --role coordinator --name coordinator --dir "$KEYS" >/dev/null
"$CTL" keys create --role operator --name operator --dir "$KEYS" --allowlist "$KEYS/operators.allow" >/dev/null
: > "$KEYS/agents.allow"
for n in node-1 node-2 victim; do
  "$CTL" keys create --role agent --name "$n" --dir "$KEYS" --allowlist "$KEYS/agents.allow" >/dev/null
done
AGENT_PORT=$(free_port)
COORD_PID=""
start_coordinator() {
  "$BIN_DIR/trainlet-coordinator" --state-dir "$TRAINLET_HOME/coordinator" \
    --agent-listen "tcp://127.0.0.1:$AGENT_PORT" --exec-listen tcp://127.0.0.1:0 \
    --operator-listen tcp://127.0.0.1:0 --key "$KEYS/coordinator.key" \
    --agent-allowlist "$KEYS/agents.allow" --operator-allowlist "$KEYS/operators.allow" \
    --runtimes-dir "$SRC/deploy/runtimes" --metrics-address "" \
    --empty-store init \
    --endpoints-file "$TRAINLET_HOME/endpoints.json" >> "$TRAINLET_HOME/logs/coordinator.log" 2>&1 &
  COORD_PID=$!
  EXTRA_PIDS+=("$COORD_PID")
}
start_agent() {  # start_agent NAME -> AGENT_PID
  "$BIN_DIR/trainlet-agent" --name "$1" --address 127.0.0.1 \
    --coordinator "tcp://127.0.0.1:$AGENT_PORT" --coordinator-key "$KEYS/coordinator.key.pub" \
    --key "$KEYS/$1.key" --state-dir "$TRAINLET_HOME/agents/$1" --slots 4 --metrics-address "" \
    >> "$TRAINLET_HOME/logs/$1.log" 2>&1 &
  AGENT_PID=$!
  EXTRA_PIDS+=("$AGENT_PID")
}
start_coordinator
wait_for 15 test -s "$TRAINLET_HOME/endpoints.json" || fail "coordinator did not start"
printf 'coordinator: %s\ncoordinator_key: keys/coordinator.key.pub\nkey: keys/operator.key\n' \
  "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["operator_endpoint"])' "$TRAINLET_HOME/endpoints.json")" \
  > "$TRAINLET_HOME/config.yaml"

stats() {  # stats FILE -> "median max" of the numbers in FILE
  sort -n "$1" | awk '{v[NR]=$1} END {m = (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2; printf "%d %d", m, v[NR]}'
}

# 1. Node death -> Lost. The time is the coordinator's own: its Ready condition's transition time
# (when it declared the node Lost) minus the moment of the kill, both on this machine's clock;
# polling trainletctl only finds out that it happened.
lost_since() {  # lost_since NODE -> the Lost transition's unix ms, or nothing while not Lost
  "$CTL" get nodes "$1" -o json 2>/dev/null | python3 -c '
import json, sys
n = json.load(sys.stdin)["nodes"][0]
if n.get("state") == "Lost":
    print(next(int(c["unixMs"]) for c in n["conditions"] if c["type"] == "Ready"))'
}
: > "$WORK/lost.ms"
for t in $(seq "$TRIALS"); do
  start_agent victim
  wait_for 20 sh -c "'$CTL' get nodes victim | grep -q ' Ready '" || fail "victim not Ready"
  sleep 0.$(( RANDOM % 10 ))  # kill at a random point of the heartbeat interval
  t0=$(now_ms)
  { kill -9 "$AGENT_PID"; wait "$AGENT_PID"; } 2>/dev/null || true
  while :; do
    lost_ms=$(lost_since victim)
    [ -n "$lost_ms" ] && break
    [ $(( $(now_ms) - t0 )) -lt 30000 ] || fail "victim not Lost 30 s after its death"
    sleep 0.05
  done
  echo $(( lost_ms - t0 )) >> "$WORK/lost.ms"
  printf '\rnode death -> Lost: trial %d/%d' "$t" "$TRIALS" >&2
done
echo >&2

# 2. Rank death -> next attempt's ranks Running.
start_agent node-1
start_agent node-2
wait_for 20 sh -c "[ \$('$CTL' get nodes | grep -cE '^node-[12] +Ready') = 2 ]" || fail "agents not Ready"
retry_runtime_yaml plain-retry 1 > "$WORK/retry-runtime.yaml"
"$CTL" apply -f "$WORK/retry-runtime.yaml" >/dev/null
job_state() {  # job_state NAME -> "attempt running_ranks rank1_pid"
  "$CTL" get trainjobs "$1" -o json 2>/dev/null | python3 -c '
import json, sys
j = json.load(sys.stdin)["jobs"][0]
rs = j.get("ranks", [])
running = sum(1 for r in rs if r.get("state") == "Running" and r.get("attempt") == j.get("attempt"))
print(j.get("attempt", 0), running, rs[1].get("pid", 0) if len(rs) > 1 else 0)'
}
: > "$WORK/restart.ms"
for t in $(seq "$TRIALS"); do
  job="fo-$t"
  sed -e "s/name: hello/name: $job/" > "$WORK/$job.yaml" <<'EOF'
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: hello
spec:
  runtimeRef:
    name: plain-retry
  trainer:
    numNodes: 2
    numProcPerNode: 2
    command: ["/bin/sleep", "300"]
EOF
  "$CTL" apply -f "$WORK/$job.yaml" >/dev/null
  wait_for 20 sh -c "'$CTL' get trainjobs $job | grep -qE 'Running +2 +4 +1 '" || fail "$job not Running"
  read -r _ _ pid <<<"$(job_state "$job")"
  sleep 0.$(( RANDOM % 10 ))
  kill -9 "$pid"
  t0=$(now_ms)
  while :; do
    read -r attempt running _ <<<"$(job_state "$job")"
    [ "$attempt" = 2 ] && [ "$running" = 4 ] && break
    [ $(( $(now_ms) - t0 )) -lt 30000 ] || fail "$job: attempt 2 not Running 30 s after the rank died"
  done
  echo $(( $(now_ms) - t0 )) >> "$WORK/restart.ms"
  "$CTL" delete trainjob "$job" >/dev/null
  printf '\rrank death -> next attempt Running: trial %d/%d' "$t" "$TRIALS" >&2
done
echo >&2

# 3. Coordinator restart -> every simulated agent re-registered.
"$BIN_DIR/trainlet-sim-agents" --count "$SIM" --endpoint "tcp://127.0.0.1:$AGENT_PORT" \
  --server-key "$KEYS/coordinator.key.pub" --allowlist "$KEYS/agents.allow" \
  > "$WORK/sim.out" 2> "$WORK/sim.err" &
SIM_PID=$!
EXTRA_PIDS+=("$SIM_PID")
wait_for 120 grep -q "^registered $SIM" "$WORK/sim.out" || fail "$SIM simulated agents did not register: $(tail -3 "$WORK/sim.err")"
: > "$WORK/reregister.ms"
for t in $(seq "$TRIALS"); do
  marks=$(grep -c '^marked' "$WORK/sim.out" || true)
  kill -USR1 "$SIM_PID"
  wait_for 10 sh -c "[ \$(grep -c '^marked' '$WORK/sim.out') -gt $marks ]" || fail "sim did not mark"
  { kill -9 "$COORD_PID"; wait "$COORD_PID"; } 2>/dev/null || true
  done_before=$(grep -c '^reregistered' "$WORK/sim.out" || true)
  t0=$(now_ms)
  start_coordinator
  wait_for 60 sh -c "[ \$(grep -c '^reregistered' '$WORK/sim.out') -gt $done_before ]" \
    || fail "simulated agents not re-registered 60 s after the restart"
  last=$(grep '^reregistered' "$WORK/sim.out" | tail -1 | sed 's/.*last_unix_ms=//')
  echo $(( last - t0 )) >> "$WORK/reregister.ms"
  printf '\rcoordinator restart -> %d agents re-registered: trial %d/%d' "$SIM" "$t" "$TRIALS" >&2
done
echo >&2

read -r lost_med lost_max <<<"$(stats "$WORK/lost.ms")"
read -r rs_med rs_max <<<"$(stats "$WORK/restart.ms")"
read -r rr_med rr_max <<<"$(stats "$WORK/reregister.ms")"
echo
echo "bench/failover: $TRIALS trials each, $(nproc) cores, $(date -u +%Y-%m-%d)"
printf '| %-44s | %9s | %9s | %-9s | %-30s |\n' measurement "median ms" "max ms" target "published defaults"
printf '|%s|%s|%s|%s|%s|\n' "$(printf -- '-%.0s' {1..46})" "-----------" "-----------" "-----------" "$(printf -- '-%.0s' {1..32})"
printf '| %-44s | %9d | %9d | %-9s | %-30s |\n' "agent SIGKILL -> node Lost (lost timeout 3 s)" "$lost_med" "$lost_max" "< 3000" "k8s 40000-50000, Slurm 300000"
printf '| %-44s | %9d | %9d | %-9s | %-30s |\n' "rank SIGKILL -> next attempt's ranks Running" "$rs_med" "$rs_max" "< 1000" "-"
printf '| %-44s | %9d | %9d | %-9s | %-30s |\n' "coordinator restart -> $SIM agents registered" "$rr_med" "$rr_max" "< 5000" "-"
