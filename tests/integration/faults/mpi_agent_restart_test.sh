#!/usr/bin/env bash
# An MPI job's remote daemons outlive an agent restart (issue 5). A real OpenMPI job runs over
# three simulated hosts (mpirun on node-1, its orted on node-2 and node-3 started through
# trainlet-exec). Its ranks join MPI, then wait for a go file. The agents of the non-launcher
# nodes are stopped, node-2's with SIGKILL and node-3's with SIGTERM, and started again on their
# state dirs. The orteds keep their pids, the job completes in its first attempt with every
# rank's allreduce right, and what the ranks on node-2 and node-3 print after the restart reaches
# the job's log. A trainlet-exec session to node-2 that spans the restart gets all of its output
# once, and its exit status. Then the coordinator is killed (SIGKILL) and restarted: the agents
# report their sessions, the new coordinator takes them back, and the trainlet-exec processes
# re-attach, so the orteds and the session run on again. Deleting the job leaves no orted, and
# the agents leave no session or step record behind.
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/../netns_lib.sh"
command -v mpirun >/dev/null || fail "mpirun not installed (apt-get install openmpi-bin)"
/usr/bin/python3 -c 'import mpi4py' 2>/dev/null || fail "python3-mpi4py is not installed"

# A lost timeout the restart stays well inside: the node must not be given up.
NETNS_LOST_TIMEOUT_MS=15000
start_netns_cluster 3
log "cluster up in $NETNS_MODE mode"

go="$WORK/go"
job=$(write_mpi_survivor_job "$go")  # workers/wait_allreduce.py, 3 hosts x 2
"$CTL" apply -f "$job" >/dev/null

# mpirun forwards each rank's writes as they come, so two ranks' lines may share one line of the
# log: count occurrences, not lines.
count() { grep -o "$1" <<<"$2" | wc -l; }
ready_ranks() { [ "$(count 'rank [0-9] ready on' "$("$CTL" logs survivor 2>/dev/null)")" = 6 ]; }
wait_for 90 ready_ranks || fail "the 6 ranks never joined MPI: $("$CTL" logs survivor 2>&1)"

# The orted that node-2's agent started (its environment names the node).
orted_on() {
  local pid
  for pid in $(own_pgrep -x orted); do
    tr '\0' '\n' < "/proc/$pid/environ" 2>/dev/null | grep -qx "TRAINLET_NODE=$1" && echo "$pid"
  done
  return 0
}
orted2=$(orted_on node-2)
[ -n "$orted2" ] && [ "$(wc -w <<<"$orted2")" = 1 ] || fail "want one orted on node-2, got '$orted2'"
ranks2=$(pgrep -P "$orted2" | tr '\n' ' ')
[ -n "$ranks2" ] || fail "the orted on node-2 has no ranks"
log "orted on node-2 is pid $orted2 (ranks $ranks2)"

# A trainlet-exec session to node-2 that spans the restart, with the launcher's credentials. It
# prints numbered lines all along, also while no agent runs and while the agent is being killed,
# so some of its output is unacknowledged, and resent, when the agent dies.
launcher=$(own_pgrep -x mpirun | head -1)
[ -n "$launcher" ] || fail "launcher mpirun not found"
creds=$(tr '\0' '\n' < "/proc/$launcher/environ" | grep '^TRAINLET_EXEC_' | tr '\n' ' ')
go2="$WORK/go2"
env $creds "$TRAINLET_BIN/trainlet-exec" "${NETNS_HOSTS[1]}" \
  "echo before-\$TRAINLET_NODE; echo err-before >&2; i=0; while [ ! -e $go2 ]; do i=\$((i + 1)); echo line-\$i; sleep 0.01; done; echo after; echo err-after >&2; exit 7" \
  > "$WORK/exec.out" 2> "$WORK/exec.err" &
exec_pid=$!
EXTRA_PIDS+=("$exec_pid")
wait_for 15 grep -q before "$WORK/exec.out" || fail "trainlet-exec printed nothing: $(cat "$WORK/exec.err")"

# Kill node-2's agent with SIGKILL, and stop node-3's with SIGTERM (what `systemctl restart`
# sends), then start both again on their state dirs. EXTRA_PIDS: the coordinator, node-1..3.
orted3=$(orted_on node-3)
[ -n "$orted3" ] && [ "$(wc -w <<<"$orted3")" = 1 ] || fail "want one orted on node-3, got '$orted3'"
agent_ep=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["agent_endpoint"])' "$TRAINLET_HOME/endpoints.json")
restart_agent() {  # restart_agent INDEX SIGNAL
  local i=$1 sig=$2 pid=${EXTRA_PIDS[$1]}
  [ "$(cat "/proc/$pid/comm")" = trainlet-agent ] || fail "pid $pid is not node-$i's agent"
  disown "$pid" 2>/dev/null || true  # no "Killed" line from this shell
  kill -"$sig" "$pid"
  wait_for 15 sh -c "! kill -0 $pid 2>/dev/null" || fail "node-$i's agent survived SIG$sig"
  log "node-$i's agent (pid $pid) stopped with SIG$sig"
  sleep 1  # the orted runs on with no agent
  netns_host_cmd "$i" "host$i"
  "${NETNS_CMD[@]}" "$TRAINLET_BIN/trainlet-agent" --name "node-$i" \
    --address "${NETNS_HOSTS[$((i - 1))]}" --coordinator "$agent_ep" \
    --coordinator-key "$TRAINLET_HOME/keys/coordinator.key.pub" --key "$TRAINLET_HOME/keys/node-$i.key" \
    --state-dir "$TRAINLET_HOME/agents/node-$i" --slots 4 --heartbeat-ms 200 --metrics-address "" \
    >> "$TRAINLET_HOME/logs/node-$i.log" 2>&1 &
  EXTRA_PIDS+=($!)
  log "node-$i's agent restarted as pid $!"
}
restart_agent 2 KILL
restart_agent 3 TERM
for i in 2 3; do
  node_log="$TRAINLET_HOME/logs/node-$i.log"
  registered_twice() { [ "$(grep -c "registered with" "$node_log")" -ge 2 ]; }
  wait_for 15 registered_twice || fail "node-$i's new agent did not register: $(tail -20 "$node_log")"
  grep -q "adopted step .*survivor" "$node_log" || fail "node-$i's new agent adopted no step: $(tail -20 "$node_log")"
  grep -q "exec .* of survivor attempt 1: adopted" "$node_log" \
    || fail "node-$i's new agent did not adopt its exec sessions: $(tail -20 "$node_log")"
done
sleep 1
kill -0 "$orted2" 2>/dev/null || fail "the orted on node-2 did not outlive the SIGKILL and restart"
kill -0 "$orted3" 2>/dev/null || fail "the orted on node-3 did not outlive the SIGTERM and restart"
[ "$(orted_on node-2)" = "$orted2" ] || fail "node-2's orted changed: $(orted_on node-2)"
[ "$(orted_on node-3)" = "$orted3" ] || fail "node-3's orted changed: $(orted_on node-3)"
kill -0 "$exec_pid" 2>/dev/null || fail "trainlet-exec ended during the restart: $(cat "$WORK/exec.err")"

# Then the coordinator: SIGKILL, and started again on the same endpoints and state dir. The
# agents re-register with their sessions, the new coordinator takes them back, and every
# trainlet-exec (mpirun's two, and ours) re-attaches by the session id it was told: the orteds,
# the ranks and our session run on.
coord=${EXTRA_PIDS[0]}
[ "$(cat "/proc/$coord/comm")" = trainlet-coordi ] || fail "pid $coord is not the coordinator"
endpoint() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$TRAINLET_HOME/endpoints.json" "$1"; }
agent_ep=$(endpoint agent_endpoint); exec_ep=$(endpoint exec_endpoint); op_ep=$(endpoint operator_endpoint)
disown "$coord" 2>/dev/null || true
kill -KILL "$coord"
wait_for 15 sh -c "! kill -0 $coord 2>/dev/null" || fail "the coordinator survived SIGKILL"
log "coordinator (pid $coord) killed with SIGKILL"
sleep 1
coord_log="$TRAINLET_HOME/logs/coordinator.log"
keys="$TRAINLET_HOME/keys"
"$TRAINLET_BIN/trainlet-coordinator" --state-dir "$TRAINLET_HOME/coordinator" \
  --agent-listen "$agent_ep" --exec-listen "$exec_ep" --operator-listen "$op_ep" \
  --key "$keys/coordinator.key" --agent-allowlist "$keys/agents.allow" \
  --operator-allowlist "$keys/operators.allow" --runtimes-dir "$TRAINLET_SOURCE_DIR/deploy/runtimes" \
  --heartbeat-ms 200 --lost-timeout-ms "$NETNS_LOST_TIMEOUT_MS" --metrics-address "" \
  >> "$coord_log" 2>&1 &
EXTRA_PIDS+=($!)
log "coordinator restarted as pid $! on the same endpoints"
reattached() { [ "$(grep -c "trainlet-exec re-attached" "$coord_log")" -ge 3 ]; }
wait_for 20 reattached || fail "the trainlet-exec sessions did not re-attach: $(grep exec "$coord_log" | tail -20)"
[ "$(grep -c "taken back from the agent" "$coord_log")" -ge 3 ] \
  || fail "the coordinator did not take the sessions back: $(grep exec "$coord_log" | tail -20)"
sleep 1
kill -0 "$orted2" 2>/dev/null || fail "the orted on node-2 did not outlive the coordinator restart"
kill -0 "$orted3" 2>/dev/null || fail "the orted on node-3 did not outlive the coordinator restart"
kill -0 "$exec_pid" 2>/dev/null || fail "trainlet-exec ended across the coordinator restart: $(cat "$WORK/exec.err")"
log "orteds and the trainlet-exec session survived the coordinator restart"

# Go: the ranks print, allreduce and end; the session prints and exits 7.
touch "$go" "$go2"
"$CTL" wait trainjob/survivor --for=condition=Complete --timeout=120s \
  || fail "survivor did not complete: $("$CTL" describe trainjob survivor)"
d=$("$CTL" describe trainjob survivor)
grep -q "Attempt: *1 " <<<"$d" || fail "survivor must not have restarted: $d"
out=$("$CTL" logs survivor)
[ "$(count "allreduce sum 21 (expected 21) OK" "$out")" = 6 ] || fail "want 6 right sums: $out"
[ "$(count "rank [0-9] after the restart on " "$out")" = 6 ] || fail "want 6 ranks after the restart: $out"
for h in host2 host3; do  # every simulated host has its own hostname, in both modes
  [ "$(count "after the restart on $h" "$out")" = 2 ] \
    || fail "the ranks on $h did not print after the restart: $out"
done
log "survivor complete in attempt 1; every rank right, node-2's ranks heard after the restart"

wait_for 30 sh -c "! kill -0 $exec_pid 2>/dev/null" || fail "trainlet-exec never got its exit status: $(cat "$WORK/exec.err")"
rc=0; wait "$exec_pid" || rc=$?
[ "$rc" = 7 ] || fail "trainlet-exec exit status $rc (want 7): $(cat "$WORK/exec.err")"
# Every line once, in order: before-node-2, line-1 .. line-N, after.
awk 'NR == 1 { ok = ($0 == "before-node-2"); next }
     $0 == "after" { done = 1; next }
     done || $0 != "line-" NR - 1 { ok = 0 }
     END { exit !(ok && done && NR > 50) }' "$WORK/exec.out" \
  || fail "trainlet-exec stdout lost, repeated or reordered a line: $(head -3 "$WORK/exec.out") ... $(tail -3 "$WORK/exec.out") ($(wc -l < "$WORK/exec.out") lines)"
[ "$(cat "$WORK/exec.err")" = "$(printf 'err-before\nerr-after')" ] || fail "trainlet-exec stderr: $(cat "$WORK/exec.err")"
log "the trainlet-exec session across the restart got all of its output once, and exit 7"

# Deleting the job leaves no orted, no rank, and no session or step record on node-2.
"$CTL" delete trainjob survivor --timeout 60s >/dev/null
wait_for 15 sh -c "[ -z \"\$(ps -o pid= -p $orted2 2>/dev/null)\" ] || ps -o stat= -p $orted2 | grep -q Z" \
  || fail "node-2's orted $orted2 outlived the job"
[ -z "$(live_orted)" ] || fail "orted still running: $(live_orted)"
no_pids() { [ -z "$(job_pids survivor)" ]; }
wait_for 15 no_pids || fail "processes of survivor remain: $(job_pids survivor)"
for i in 2 3; do
  state="$TRAINLET_HOME/agents/node-$i"
  wait_for 15 sh -c "[ -z \"\$(ls '$state/exec')\" ] && [ -z \"\$(ls '$state/steps')\" ]" \
    || fail "records left on node-$i: exec: $(ls "$state/exec") steps: $(ls "$state/steps")"
done
log "delete left no orted; the restarted agents kept no session or step record"
echo "PASS mpi_agent_restart_test ($NETNS_MODE mode)"
