#!/usr/bin/env bash
# bench/failover/etcd.sh (also `run.sh --etcd`): coordinators in high availability on etcd
# (issue 17). A 3-member etcd on loopback ports, 2 coordinators on `store: etcd` with the default
# lease (3 s) and heartbeat (1 s), and S simulated agents that know both (trainlet-sim-agents
# --endpoint a,b). Over N trials, the leader is killed with SIGKILL and timed:
#   apply        until `trainletctl apply` (configured with both endpoints) is accepted again;
#   re-register  until every simulated agent has had a registration accepted by the new leader.
# The killed coordinator is started again (a follower) before the next trial. Then `apply`
# latency: the wall time of `trainletctl apply` of a 1-job file, M times, on the etcd leader and
# on a coordinator with SQLite (the same command on both, so trainletctl's own start is in both).
#
# usage: bench/failover/etcd.sh [--trials N] [--sim-agents S] [--applies M] [--bin BUILD/bin]
#                               [--logs DIR]   (keep each trial's coordinator logs and sim output)
# Not a ctest test.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
TRIALS=10
SIM=1000
APPLIES=30
LOGS=
BIN_DIR=${TRAINLET_BIN:-$SRC/build/bin}
while [ $# -gt 0 ]; do
  case "$1" in
    --trials) TRIALS=${2:?}; shift 2 ;;
    --sim-agents) SIM=${2:?}; shift 2 ;;
    --applies) APPLIES=${2:?}; shift 2 ;;
    --bin) BIN_DIR=${2:?}; shift 2 ;;
    --logs) LOGS=${2:?}; shift 2 ;;
    --etcd) shift ;;
    -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
done
BIN_DIR=$(cd "$BIN_DIR" 2>/dev/null && pwd) || { echo "--bin: no such directory" >&2; exit 2; }
export TRAINLET_BIN=$BIN_DIR TRAINLET_SOURCE_DIR=$SRC
source "$SRC/tests/integration/lib.sh"
source "$SRC/tests/integration/faults/ha_lib.sh"
HA_TTL=3  # the coordinator's default lease

now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
stats() {  # stats FILE -> "median max"
  sort -n "$1" | awk '{v[NR]=$1} END {m = (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2; printf "%d %d", m, v[NR]}'
}
KEYS="$TRAINLET_HOME/keys"
mkdir -p "$KEYS" "$TRAINLET_HOME/logs"
"$CTL" keys create --role coordinator --name coordinator --dir "$KEYS" >/dev/null
"$CTL" keys create --role operator --name operator --dir "$KEYS" --allowlist "$KEYS/operators.allow" >/dev/null
: > "$KEYS/agents.allow"
COORD_ARGS=("$BIN_DIR/trainlet-coordinator" --state-dir x --agent-listen x --operator-listen x
  --exec-listen x --endpoints-file x --key "$KEYS/coordinator.key"
  --agent-allowlist "$KEYS/agents.allow" --operator-allowlist "$KEYS/operators.allow"
  --runtimes-dir "$SRC/deploy/runtimes" --metrics-address "")

start_etcd
start_coordinator 1
wait_for 15 grep -q "elected leader" "$WORK/coord1.log" || fail "coordinator 1 never led"
start_coordinator 2
wait_for 15 grep -q "following until elected" "$WORK/coord2.log" || fail "coordinator 2 did not start"
printf 'coordinator: "%s,%s"\ncoordinator_key: keys/coordinator.key.pub\nkey: keys/operator.key\n' \
  "$OP_EP_1" "$OP_EP_2" > "$TRAINLET_HOME/config.yaml"
"$BIN_DIR/trainlet-sim-agents" --count "$SIM" --endpoint "$AGENT_EP_1,$AGENT_EP_2" \
  --server-key "$KEYS/coordinator.key.pub" --allowlist "$KEYS/agents.allow" \
  > "$WORK/sim.out" 2> "$WORK/sim.err" &
SIM_PID=$!
EXTRA_PIDS+=("$SIM_PID")
wait_for 180 grep -q "^registered $SIM" "$WORK/sim.out" || fail "$SIM simulated agents did not register"

job_file() {  # job_file NAME -> a suspended 1-node job: stored, never placed
  printf 'apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata:\n  name: %s\nspec:\n  suspend: true\n  runtimeRef:\n    name: plain\n  trainer:\n    numNodes: 1\n    command: ["true"]\n' "$1" > "$WORK/$1.yaml"
  echo "$WORK/$1.yaml"
}

leader=1
: > "$WORK/apply.ms"; : > "$WORK/rereg.ms"
for t in $(seq "$TRIALS"); do
  marks=$(grep -c '^marked' "$WORK/sim.out" || true)
  kill -USR1 "$SIM_PID"
  wait_for 10 sh -c "[ \$(grep -c '^marked' '$WORK/sim.out') -gt $marks ]" || fail "sim did not mark"
  done_before=$(grep -c '^reregistered' "$WORK/sim.out" || true)
  pid=$(eval echo "\$COORD_PID_$leader")
  f=$(job_file "fo-$t")
  t0=$(now_ms)
  kill -9 "$pid"
  until timeout 20 "$CTL" apply -f "$f" >/dev/null 2>&1; do
    [ $(( $(now_ms) - t0 )) -lt 60000 ] || fail "no apply accepted 60 s after the leader died"
    sleep 0.05
  done
  echo $(( $(now_ms) - t0 )) >> "$WORK/apply.ms"
  wait_for 60 sh -c "[ \$(grep -c '^reregistered' '$WORK/sim.out') -gt $done_before ]" \
    || fail "simulated agents not re-registered 60 s after the leader died"
  last=$(grep '^reregistered' "$WORK/sim.out" | tail -1 | sed 's/.*last_unix_ms=//')
  echo $(( last - t0 )) >> "$WORK/rereg.ms"
  if [ -n "$LOGS" ]; then
    mkdir -p "$LOGS"
    echo "kill_unix_ms=$t0" > "$LOGS/trial$t.kill"
    for f in "$WORK"/coord*.log "$WORK/sim.out"; do cp "$f" "$LOGS/trial$t-$(basename "$f")"; done
  fi
  : > "$WORK/coord$leader.log"
  start_coordinator "$leader"
  wait_for 15 grep -q "following until elected" "$WORK/coord$leader.log" || fail "restart failed"
  leader=$(( 3 - leader ))
  printf '\rleader SIGKILL: trial %d/%d' "$t" "$TRIALS" >&2
done
echo >&2

# apply latency: etcd (the leader now) against SQLite.
: > "$WORK/etcd-apply.ms"
for i in $(seq "$APPLIES"); do
  f=$(job_file "lat-$i"); s=$(now_ms)
  "$CTL" apply -f "$f" >/dev/null
  echo $(( $(now_ms) - s )) >> "$WORK/etcd-apply.ms"
done
sq_op=$(free_port)
args=("${COORD_ARGS[@]}")
for i in "${!args[@]}"; do
  case "${args[$i]}" in
    --agent-listen|--exec-listen) args[$((i + 1))]=tcp://127.0.0.1:0 ;;
    --operator-listen) args[$((i + 1))]=tcp://127.0.0.1:$sq_op ;;
    --state-dir) args[$((i + 1))]=$WORK/sqlite ;;
    --endpoints-file) args[$((i + 1))]=$WORK/sqlite.json ;;
  esac
done
# A new store is initialised once, explicitly (issue 19, defect 3: an empty one is refused).
"${args[@]}" --init-store >> "$WORK/sqlite.log" 2>&1 || fail "the SQLite store: $(tail -3 "$WORK/sqlite.log")"
"${args[@]}" >> "$WORK/sqlite.log" 2>&1 &
EXTRA_PIDS+=("$!")
wait_for 15 test -s "$WORK/sqlite.json" || fail "the SQLite coordinator did not start"
sed -i "s|^coordinator:.*|coordinator: tcp://127.0.0.1:$sq_op|" "$TRAINLET_HOME/config.yaml"
: > "$WORK/sqlite-apply.ms"
for i in $(seq "$APPLIES"); do
  f=$(job_file "lat-$i"); s=$(now_ms)
  "$CTL" apply -f "$f" >/dev/null
  echo $(( $(now_ms) - s )) >> "$WORK/sqlite-apply.ms"
done

read -r ap_med ap_max <<<"$(stats "$WORK/apply.ms")"
read -r rr_med rr_max <<<"$(stats "$WORK/rereg.ms")"
read -r ea_med ea_max <<<"$(stats "$WORK/etcd-apply.ms")"
read -r sa_med sa_max <<<"$(stats "$WORK/sqlite-apply.ms")"
echo
echo "bench/failover --etcd: $TRIALS trials, $SIM simulated agents, $APPLIES applies, $(nproc) cores, $(date -u +%Y-%m-%d)"
printf '| %-52s | %9s | %9s | %-8s |\n' measurement "median ms" "max ms" target
printf '|%s|%s|%s|%s|\n' "$(printf -- '-%.0s' {1..54})" "-----------" "-----------" "----------"
printf '| %-52s | %9d | %9d | %-8s |\n' "leader SIGKILL -> apply accepted again (lease 3 s)" "$ap_med" "$ap_max" "<= 5000"
printf '| %-52s | %9d | %9d | %-8s |\n' "leader SIGKILL -> $SIM agents re-registered" "$rr_med" "$rr_max" "<= 5000"
printf '| %-52s | %9d | %9d | %-8s |\n' "trainletctl apply, etcd (3 members)" "$ea_med" "$ea_max" "<= 3x"
printf '| %-52s | %9d | %9d | %-8s |\n' "trainletctl apply, SQLite" "$sa_med" "$sa_max" "-"
