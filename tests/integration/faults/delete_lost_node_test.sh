#!/usr/bin/env bash
# Issue 19: a delete and the data of a job whose node is away.
# 1. Delete of a job whose node is Lost (its agent SIGSTOPped): the job stays Terminating (get,
#    describe say why) until the node comes back and confirms its rank stopped; then it goes, and
#    so does its data there. Today's main said "deleted" at once.
# 2. delete --force removes such a job at once; the node, away at the delete, gets its PurgeJob
#    when it registers again, and the job's data there goes (today's main kept it).
# 3. An agent killed (stopped for good), its job deleted, the agent started again: the job's data
#    on its node goes.
# 4. Data a missed purge left (stamped with an older incarnation's UID) is removed before a job
#    applied again under the name starts: its logs and work dir show nothing of it.
source "$(dirname "$0")/../lib.sh"

start_cluster 2 --slots 2
vpid=""
trap 'rc=$?; [ -n "$vpid" ] && kill -CONT "$vpid" 2>/dev/null; (exit $rc); cleanup' EXIT
node_of() { "$CTL" get trainjobs "$1" -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)["jobs"][0]["placement"][0])'; }
agent_pid() { awk '{print $1}' "$TRAINLET_HOME/pids/$1.pid"; }
data_of() { ls -d "$TRAINLET_HOME"/agents/*/logs/"$1" "$TRAINLET_HOME"/agents/*/work/"$1" 2>/dev/null || true; }
gone() { ! "$CTL" get trainjobs "$1" >/dev/null 2>&1; }
run_sleeper() {  # run_sleeper NAME: a 1-rank job, Running; sets victim to its node
  "$CTL" apply -f "$(write_job "$1" 1 1 'echo started-$TRAINLET_JOB; sleep 300')" >/dev/null
  wait_for 20 sh -c "'$CTL' get trainjobs $1 | grep -q Running" || fail "$1 never Running"
  victim=$(node_of "$1")
  [ -n "$(data_of "$1")" ] || fail "$1 left no data on $victim"
}

# 1. SIGSTOP: Terminating until the node confirms.
run_sleeper held
vpid=$(agent_pid "$victim")
kill -STOP "$vpid"
wait_for 10 sh -c "'$CTL' get nodes $victim | grep -q Lost" || fail "$victim not Lost"
"$CTL" delete trainjob held --wait=false >/dev/null
sleep 3  # past the lost timeout: today's main had removed it
"$CTL" get trainjobs held | grep -q Terminating || fail "held is not Terminating: $("$CTL" get trainjobs held 2>&1)"
assert_contains "$("$CTL" describe trainjob held)" "DeleteWaitsForNode" "describe"
assert_contains "$("$CTL" describe trainjob held)" "node $victim (Lost)" "describe"
out=$("$CTL" delete trainjob held --timeout 1s 2>&1) && fail "delete --timeout 1s said done: $out"
assert_contains "$out" "still Terminating" "delete's answer"
kill -CONT "$vpid"; vpid=""
wait_for 30 gone held || fail "held not removed after $victim came back: $("$CTL" describe trainjob held)"
wait_for 15 sh -c "[ -z \"\$(ls -d '$TRAINLET_HOME'/agents/*/logs/held '$TRAINLET_HOME'/agents/*/work/held 2>/dev/null)\" ]" ||
  fail "held's data stayed: $(data_of held)"
[ -z "$(job_pids held)" ] || fail "ranks of held remain: $(job_pids held)"
log "delete on a Lost node: Terminating until the node confirmed, then gone with its data"

# 2. --force while the node is away; its purge comes when it registers.
wait_for 10 sh -c "'$CTL' get nodes $victim | grep -q Ready" || fail "$victim not Ready again"
run_sleeper forced
vpid=$(agent_pid "$victim")
kill -STOP "$vpid"
wait_for 10 sh -c "'$CTL' get nodes $victim | grep -q Lost" || fail "$victim not Lost"
"$CTL" delete trainjob forced --force >/dev/null
gone forced || fail "forced still listed after delete --force"
[ -n "$(data_of forced)" ] || fail "forced's data went while its node was stopped?"
kill -CONT "$vpid"; vpid=""
wait_for 30 sh -c "[ -z \"\$(ls -d '$TRAINLET_HOME'/agents/*/logs/forced '$TRAINLET_HOME'/agents/*/work/forced 2>/dev/null)\" ]" ||
  fail "forced's data stayed on $victim after it registered: $(data_of forced)"
no_forced() { [ -z "$(job_pids forced)" ]; }
wait_for 15 no_forced || fail "ranks of forced remain: $(job_pids forced)"
log "delete --force: gone at once; the node's data purged when it registered"

# 3. The agent killed, its job deleted, the agent started again.
wait_for 10 sh -c "'$CTL' get nodes $victim | grep -q Ready" || fail "$victim not Ready again"
run_sleeper killed
apid=$(agent_pid "$victim")
mapfile -d '' aargs < "/proc/$apid/cmdline"
for i in "${!aargs[@]}"; do
  [ "${aargs[$i]}" = --metrics-address ] && aargs[$((i + 1))]=127.0.0.1:0
done
kill -9 "$apid"
wait_for 10 sh -c "'$CTL' get nodes $victim | grep -q Lost" || fail "$victim not Lost"
"$CTL" delete trainjob killed --wait=false >/dev/null
setsid "${aargs[@]}" >> "$TRAINLET_HOME/logs/$victim.log" 2>&1 < /dev/null &
apid=$!
disown "$apid"
echo "$apid $(awk '{print $22}' "/proc/$apid/stat")" > "$TRAINLET_HOME/pids/$victim.pid"
wait_for 30 gone killed || fail "killed not removed after its agent restarted"
wait_for 15 sh -c "[ -z \"\$(ls -d '$TRAINLET_HOME'/agents/*/logs/killed '$TRAINLET_HOME'/agents/*/work/killed 2>/dev/null)\" ]" ||
  fail "killed's data stayed after its agent restarted: $(data_of killed)"
log "agent killed, job deleted, agent restarted: the data went"

# 4. Data a missed purge left behind, stamped with an older incarnation's UID, on every node.
for d in "$TRAINLET_HOME"/agents/*/; do  # the agents' state dirs (local up also keeps <node>.hosts there)
  mkdir -p "$d/logs/ghost/attempt-1" "$d/work/ghost"
  echo 0123456789abcdef0123456789abcdef > "$d/logs/ghost/.trainlet-uid"
  echo ghost-old-output > "$d/logs/ghost/attempt-1/rank-0.log"
  echo old > "$d/work/ghost/old-incarnation-file"
done
"$CTL" apply -f "$(write_job ghost 1 1 'ls; echo ghost-new-output')" >/dev/null
"$CTL" wait trainjob/ghost --for=condition=Complete --timeout=30s >/dev/null || fail "ghost did not complete"
out=$("$CTL" logs ghost)
assert_contains "$out" "ghost-new-output" "logs"
case "$out" in *ghost-old-output*|*old-incarnation-file*) fail "ghost sees its old incarnation: $out" ;; esac
log "a re-applied name sees nothing a missed purge left"
echo "PASS delete_lost_node_test"
