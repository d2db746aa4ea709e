#!/usr/bin/env bash
# A cordon outlives a coordinator restart: it is stored before `trainletctl cordon` answers, the
# restarted coordinator applies it when the node registers again, and new jobs stay off the node.
source "$(dirname "$0")/../lib.sh"

start_cluster 2 --slots 2
"$CTL" cordon node-1 --reason "bios update" | grep -q "node/node-1 cordoned" || fail "cordon output"
pidfile="$TRAINLET_HOME/pids/coordinator.pid"
cpid=$(awk '{print $1}' "$pidfile")
mapfile -d '' cargs < "/proc/$cpid/cmdline"
# The same command line, with the ports it picked instead of port 0.
eps="$TRAINLET_HOME/coordinator/endpoints.json"
ep() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$eps" "$1"; }
agent_ep=$(ep agent_endpoint) op_ep=$(ep operator_endpoint) exec_ep=$(ep exec_endpoint)
for i in "${!cargs[@]}"; do
  case "${cargs[$i]}" in
    --agent-listen) cargs[$((i + 1))]=$agent_ep ;;
    --operator-listen) cargs[$((i + 1))]=$op_ep ;;
    --exec-listen) cargs[$((i + 1))]=$exec_ep ;;
  esac
done
kill -9 "$cpid"
log "coordinator killed (pid $cpid)"
setsid "${cargs[@]}" >> "$TRAINLET_HOME/logs/coordinator.log" 2>&1 < /dev/null &
newpid=$!
echo "$newpid $(awk '{print $22}' "/proc/$newpid/stat")" > "$pidfile"
log "coordinator restarted (pid $newpid)"

both_ready() { [ "$("$CTL" get nodes | grep -cE '^node-[12] +Ready')" = 2 ]; }
wait_for 20 both_ready || fail "agents did not re-register: $("$CTL" get nodes)"
"$CTL" get nodes | grep -Eq '^node-1 +Ready,SchedulingDisabled' || fail "node-1 lost its cordon: $("$CTL" get nodes)"
"$CTL" get nodes | grep -Eq '^node-2 +Ready +' || fail "node-2 should be schedulable: $("$CTL" get nodes)"
d=$("$CTL" describe node node-1)
grep -Eq "^  SchedulingDisabled +True +.*Cordoned +bios update$" <<<"$d" || fail "cordon reason after restart: $d"

# A new job lands on node-2 only; a job that needs both nodes waits, saying why.
one=$(write_job one 1 2 'true')
"$CTL" apply -f "$one" >/dev/null
"$CTL" wait trainjob/one --for=condition=Complete --timeout=30s >/dev/null || fail "one did not complete"
"$CTL" describe trainjob one | grep -Eq '^  [01] +node-2 ' || fail "one should run on node-2: $("$CTL" describe trainjob one)"
if "$CTL" describe trainjob one | grep -Eq '^  [01] +node-1 '; then fail "a rank landed on cordoned node-1"; fi
two=$(write_job two 2 1 'true')
"$CTL" apply -f "$two" >/dev/null
pending_cordoned() { "$CTL" get trainjobs two -o wide | grep -q "cordoned"; }
wait_for 10 pending_cordoned || fail "two should be Pending on the cordon: $("$CTL" get trainjobs two -o wide)"
"$CTL" uncordon node-1 | grep -q "node/node-1 uncordoned" || fail "uncordon output"
"$CTL" wait trainjob/two --for=condition=Complete --timeout=30s >/dev/null || fail "two did not run after uncordon"
echo "PASS cordon_restart_test"
