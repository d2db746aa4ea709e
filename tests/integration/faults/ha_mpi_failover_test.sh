#!/usr/bin/env bash
# An MPI job's trainlet-exec sessions carry on across an HA failover (issue 17). A 3-member etcd
# cluster, two coordinators on `store: etcd` that name each other in `exec_peers`, and three
# agents on simulated hosts (netns_lib.sh). A real OpenMPI job (mpirun on node-1, its orted on
# node-2 and node-3 through trainlet-exec) joins MPI and waits for a go file. The leader is killed
# with SIGKILL: the standby takes over, the agents re-register with it and hand it their exec
# sessions, and each trainlet-exec, silent from the dead leader, moves to the next endpoint in
# TRAINLET_EXEC_ENDPOINT and re-attaches. Then the ranks allreduce: the job completes in attempt 1
# with every rank's sum right, and the orteds keep their pids. Without exec_peers the launcher knew
# only the dead leader, its trainlet-exec exited after 10 s, and the attempt failed.
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/../netns_lib.sh"
source "$(dirname "$0")/ha_lib.sh"
command -v mpirun >/dev/null || fail "mpirun not installed (apt-get install openmpi-bin)"
/usr/bin/python3 -c 'import mpi4py' 2>/dev/null || fail "python3-mpi4py is not installed"

netns_setup 3
start_etcd
netns_make_keys 3
keys="$TRAINLET_HOME/keys"
host=127.0.0.1
[ "$NETNS_MODE" = netns ] && host="$NETNS_SUBNET.1"
for n in 1 2; do
  eval "A$n=tcp://$host:$(free_port) O$n=tcp://127.0.0.1:$(free_port) X$n=tcp://$host:$(free_port)"
done
# coordinator_args N PEER-EXEC: CARGS, coordinator N's command line.
coordinator_args() {
  local n=$1 peer=$2 a o x
  a=$(eval echo "\$A$n"); o=$(eval echo "\$O$n"); x=$(eval echo "\$X$n")
  mkdir -p "$WORK/coord$n"
  CARGS=("$TRAINLET_BIN/trainlet-coordinator" --state-dir "$WORK/coord$n" --agent-listen "$a"
    --operator-listen "$o" --exec-listen "$x" --exec-peers "$peer" --key "$keys/coordinator.key"
    --agent-allowlist "$keys/agents.allow" --operator-allowlist "$keys/operators.allow"
    --runtimes-dir "$TRAINLET_SOURCE_DIR/deploy/runtimes" --heartbeat-ms 200
    --lost-timeout-ms 15000 --metrics-address "" --store etcd --etcd-endpoints "$ETCD_ENDPOINTS"
    --etcd-prefix "$HA_PREFIX" --etcd-lease-ttl-s "$HA_TTL" --etcd-request-timeout-ms 3000)
}
coordinator_args 1 "$X2"
"${CARGS[@]}" --init-store >> "$WORK/coord1.log" 2>&1 || fail "store init: $(tail -5 "$WORK/coord1.log")"
setsid "${CARGS[@]}" >> "$WORK/coord1.log" 2>&1 < /dev/null &
COORD_PID_1=$!; EXTRA_PIDS+=("$!")
wait_for 15 grep -q "elected leader" "$WORK/coord1.log" || { ha_logs; fail "coordinator 1 never led"; }
coordinator_args 2 "$X1"
setsid "${CARGS[@]}" >> "$WORK/coord2.log" 2>&1 < /dev/null &
COORD_PID_2=$!; EXTRA_PIDS+=("$!")
wait_for 15 grep -q "following until elected" "$WORK/coord2.log" || { ha_logs; fail "coordinator 2 did not start"; }
printf 'coordinator: "%s,%s"\ncoordinator_key: keys/coordinator.key.pub\nkey: keys/operator.key\n' \
  "$O1" "$O2" > "$TRAINLET_HOME/config.yaml"
netns_start_agents 3 "$A1,$A2"
log "2 coordinators on etcd, 3 agents in $NETNS_MODE mode"

go="$WORK/go"
job=$(write_mpi_survivor_job "$go")  # workers/wait_allreduce.py, 3 hosts x 2
"$CTL" apply -f "$job" >/dev/null || { ha_logs; fail "apply"; }
count() { grep -o "$1" <<<"$2" | wc -l; }
ready_ranks() { [ "$(count 'rank [0-9] ready on' "$("$CTL" logs survivor 2>/dev/null)")" = 6 ]; }
wait_for 90 ready_ranks || { ha_logs; fail "the 6 ranks never joined MPI: $("$CTL" logs survivor 2>&1)"; }
launcher=$(own_pgrep -x mpirun | head -1)
[ -n "$launcher" ] || fail "launcher mpirun not found"
tr '\0' '\n' < "/proc/$launcher/environ" | grep -qx "TRAINLET_EXEC_ENDPOINT=$X1,$X2" \
  || fail "the launcher's exec endpoints: $(tr '\0' '\n' < "/proc/$launcher/environ" | grep EXEC_ENDPOINT)"
orteds=$(own_pgrep -x orted | sort | tr '\n' ' ')
[ "$(wc -w <<<"$orteds")" = 2 ] || fail "want 2 orteds, got '$orteds'"
execs=$(own_pgrep -x trainlet-exec | sort | tr '\n' ' ')
[ "$(wc -w <<<"$execs")" = 2 ] || fail "want 2 trainlet-exec, got '$execs'"

disown "$COORD_PID_1" 2>/dev/null || true
kill -9 "$COORD_PID_1"
log "leader killed (pid $COORD_PID_1)"
wait_for 15 grep -q "elected leader" "$WORK/coord2.log" || { ha_logs; fail "coordinator 2 did not take over"; }
reattached() { [ "$(grep -c "trainlet-exec re-attached" "$WORK/coord2.log")" = 2 ]; }
wait_for 40 reattached || { ha_logs; fail "the trainlet-execs did not re-attach to the new leader"; }
log "both trainlet-exec sessions re-attached to the new leader"
[ "$(own_pgrep -x orted | sort | tr '\n' ' ')" = "$orteds" ] || fail "the orteds changed: $(own_pgrep -x orted)"
[ "$(own_pgrep -x trainlet-exec | sort | tr '\n' ' ')" = "$execs" ] || fail "the trainlet-execs changed"
touch "$go"
"$CTL" wait trainjob/survivor --for=condition=Complete --timeout=60s \
  || { ha_logs; fail "survivor did not complete: $("$CTL" describe trainjob survivor; "$CTL" logs survivor)"; }
d=$("$CTL" describe trainjob survivor)
grep -q "Attempt: *1 " <<<"$d" || fail "the job must not have restarted: $d"
out=$("$CTL" logs survivor)
[ "$(count 'allreduce sum 21 (expected 21) OK' "$out")" = 6 ] || fail "6 ranks must sum right: $out"
log "the MPI job completed across the failover in attempt 1"
echo "PASS ha_mpi_failover_test"
