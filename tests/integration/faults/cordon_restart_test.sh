#!/usr/bin/env bash
# A cordon outlives a coordinator restart: it is stored before `trainletctl cordon` answers, the
# restarted coordinator applies it when the node registers again, and new jobs stay off the node.
source "$(dirname "$0")/../lib.sh"

start_cluster 2 --slots 2
"$CTL" cordon node-1 --reason "bios update" | grep -q "node/node-1 cordoned" || fail "cordon output"
remember_coordinator
kill -9 "$COORD_PID"
log "coordinator killed (pid $COORD_PID)"
restart_coordinator

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
