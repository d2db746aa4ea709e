#!/usr/bin/env bash
# A coordinator and 3 agents on loopback: the life of a job, end to end.
source "$(dirname "$0")/lib.sh"

start_cluster 3 --slots 4
log "cluster up"

nodes_json=$("$CTL" get nodes -o json)
[ "$(grep -c '"state": "Ready"' <<<"$nodes_json")" = 3 ] || fail "3 Ready nodes expected: $nodes_json"
# Into a variable: with pipefail, grep -q leaving a long pipe early would fail the test.
nodes_yaml=$("$CTL" get nodes -o yaml)
grep -q "state: Ready" <<<"$nodes_yaml" || fail "get nodes -o yaml"
"$CTL" get nodes | head -1 | grep -q "NAME.*STATUS.*CPUS.*MEMORY.*GPUS.*AGE" || fail "get nodes header"

# 1. A 3-node x 4-rank job completes, and every rank's output is in its log.
job=$(write_job big 3 4 'echo "out of rank $TRAINLET_RANK/$TRAINLET_WORLD_SIZE node $TRAINLET_NODE_RANK local $TRAINLET_LOCAL_RANK"; echo "err of rank $TRAINLET_RANK" >&2')
out=$("$CTL" apply -f "$job")
[ "$out" = "trainjob/big created" ] || fail "apply printed: $out"
"$CTL" wait trainjob/big --for=condition=Complete --timeout=60s || fail "big did not complete"
"$CTL" get trainjobs | grep -E "^big +Succeeded +3 +12 +1 " || fail "get trainjobs row: $("$CTL" get trainjobs)"
for r in $(seq 0 11); do
  l=$("$CTL" logs big --rank "$r")
  assert_contains "$l" "out of rank $r/12 node $((r / 4)) local $((r % 4))" "rank $r stdout"
  assert_contains "$l" "err of rank $r" "rank $r stderr"
done
all=$("$CTL" logs big)
[ "$(grep -c '^\[rank [0-9]*\] out of rank' <<<"$all")" = 12 ] || fail "logs without --rank: $all"
# The log files themselves, one per rank, on the nodes that ran them.
[ "$(find "$TRAINLET_HOME/agents" -path '*/logs/big/attempt-1/rank-*.log' | wc -l)" = 12 ] || fail "12 log files"
log "3x4 job complete, logs ok"

# 2. One failing rank fails the job, with its exit code in describe.
job=$(write_job failing 3 2 'if [ "$TRAINLET_RANK" = 4 ]; then exit 7; fi; sleep 30')
"$CTL" apply -f "$job" >/dev/null
if "$CTL" wait trainjob/failing --for=condition=Complete --timeout=60s 2> "$WORK/wait.err"; then
  fail "waiting for Complete on a failing job must fail"
fi
assert_contains "$(cat "$WORK/wait.err")" "never be Complete" "wait's message"
"$CTL" wait trainjob/failing --for=condition=Failed --timeout=10s >/dev/null
d=$("$CTL" describe trainjob failing)
grep -E "^  4 +node-[0-9]+ +[0-9]+ +Failed +[0-9]+ +7 " <<<"$d" >/dev/null || fail "rank 4 exit 7 in describe: $d"
assert_contains "$d" "rank 4 on node-" "attempt cause"
assert_contains "$d" "exited with code 7" "attempt cause"
# The other ranks were stopped, not left running.
no_failing_pids() { [ -z "$(job_pids failing)" ]; }
wait_for 20 no_failing_pids || fail "ranks of the failed job still alive: $(job_pids failing)"
log "failing job ok"

# 3. delete of a running job leaves no process of it behind.
job=$(write_job sleeper 3 2 'sleep 300 & sleep 300; wait')
"$CTL" apply -f "$job" >/dev/null
wait_for 30 sh -c "'$CTL' get trainjobs sleeper | grep -q Running" || fail "sleeper never Running"
[ -n "$(job_pids sleeper)" ] || fail "no sleeper processes found while Running"
"$CTL" delete trainjob sleeper --timeout 30s | grep -q "trainjob/sleeper deleted" || fail "delete output"
left=$(job_pids sleeper)
[ -z "$left" ] || fail "processes of the deleted job remain: $left"
if "$CTL" get trainjobs sleeper 2>/dev/null; then fail "sleeper still listed after delete"; fi
log "delete ok"

# 3b. Several at once, as kubectl: `delete trainjob a b` and `delete trainjob/a trainjob/b`; a name
# that does not exist is said, the others still go, and the exit is 1.
for n in del-a del-b del-c; do "$CTL" apply -f "$(write_job "$n" 1 1 'sleep 300')" >/dev/null; done
rc=0; out=$("$CTL" delete trainjob del-a nosuch del-b --timeout 30s 2>&1) || rc=$?
[ "$rc" -eq 1 ] || fail "delete with a missing name exited $rc: $out"
assert_contains "$out" "trainjob/del-a deleted" "delete a b"
assert_contains "$out" "trainjob/del-b deleted" "delete a b"
assert_contains "$out" "trainjob/nosuch not found" "delete a b"
"$CTL" delete trainjob/del-c --timeout 30s | grep -q "trainjob/del-c deleted" || fail "delete trainjob/NAME"
for n in del-a del-b del-c; do
  if "$CTL" get trainjobs "$n" 2>/dev/null; then fail "$n still listed after delete"; fi
done
log "delete of several trainjobs ok"

# 3c. wait on several, as kubectl: each is waited for within one --timeout; exit 1 when one fails.
for n in wait-a wait-b; do "$CTL" apply -f "$(write_job "$n" 1 1 'sleep 0.5')" >/dev/null; done
out=$("$CTL" wait trainjob/wait-a trainjob/wait-b --for=condition=Complete --timeout=30s) ||
  fail "wait on two trainjobs: $out"
assert_contains "$out" "trainjob/wait-a condition met" "wait a b"
assert_contains "$out" "trainjob/wait-b condition met" "wait a b"
rc=0; out=$("$CTL" wait trainjob wait-a nosuch --for=condition=Complete --timeout=5s 2>&1) || rc=$?
[ "$rc" -eq 1 ] || fail "wait with a missing name exited $rc: $out"
assert_contains "$out" "trainjob/wait-a condition met" "wait trainjob a nosuch"
assert_contains "$out" "trainjob/nosuch not found" "wait trainjob a nosuch"
# get, the same way: one table; a missing name is said, the others shown, exit 1.
out=$("$CTL" get trainjobs wait-a wait-b -o name) || fail "get two trainjobs: $out"
[ "$out" = "$(printf 'trainjob/wait-a\ntrainjob/wait-b')" ] || fail "get trainjobs wait-a wait-b: $out"
rc=0; out=$("$CTL" get trainjob/wait-b trainjob/nosuch 2>&1) || rc=$?
[ "$rc" -eq 1 ] || fail "get with a missing name exited $rc: $out"
assert_contains "$out" "wait-b" "get trainjob/wait-b trainjob/nosuch"
assert_contains "$out" "trainjob/nosuch not found" "get trainjob/wait-b trainjob/nosuch"
"$CTL" delete trainjob wait-a wait-b >/dev/null
log "wait and get on several trainjobs ok"

# 4. A job asking for more nodes than exist stays Pending, with a reason.
job=$(write_job toobig 5 1 'true')
"$CTL" apply -f "$job" >/dev/null
sleep 0.5
row=$("$CTL" get trainjobs toobig -o wide)
assert_contains "$row" "Pending" "toobig phase"
assert_contains "$("$CTL" describe trainjob toobig)" "needs 5 nodes" "toobig reason"
# For scripts: the reason is one word, and what the job needs is the message, in the status and
# in its event alike.
"$CTL" get trainjob toobig -o json | python3 -c '
import json, sys
j = json.load(sys.stdin)["jobs"][0]
assert j["reason"] == "Unschedulable" and "needs 5 nodes" in j["message"], j
ev = [e for e in j["events"] if e["reason"] == "Unschedulable"]
assert ev and "needs 5 nodes" in ev[-1]["message"], j["events"]' || fail "toobig reason and message"
"$CTL" delete trainjob toobig >/dev/null
log "pending-with-reason ok"

# 5. wait times out with a clear message and a non-zero exit.
job=$(write_job slow 1 1 'sleep 30')
"$CTL" apply -f "$job" >/dev/null
if "$CTL" wait trainjob/slow --for=condition=Complete --timeout=1s 2> "$WORK/wait.err"; then
  fail "wait must time out"
fi
assert_contains "$(cat "$WORK/wait.err")" "timed out" "timeout message"
"$CTL" delete trainjob slow >/dev/null
# --timeout=0 waits without a limit, and a timeout past 2^32 ms does not wrap into a short one:
# both see a 12 s job through (longer than the client's 10 s margin over a request).
"$CTL" apply -f "$(write_job twelve 1 1 'sleep 12')" >/dev/null
for t in 0 4294969s; do
  "$CTL" wait trainjob/twelve --for=condition=Complete --timeout=$t > "$WORK/wait-$t.out" \
    2> "$WORK/wait-$t.err" &
  EXTRA_PIDS+=($!)
done
for t in 0 4294969s; do
  pid=${EXTRA_PIDS[-1]}; unset 'EXTRA_PIDS[-1]'
  wait "$pid" || true
done
for t in 0 4294969s; do
  assert_contains "$(cat "$WORK/wait-$t.out")" "condition met" "wait --timeout=$t: $(cat "$WORK/wait-$t.err")"
done
for t in 1e300h inf nan -1s; do
  if "$CTL" wait trainjob/twelve --for=condition=Complete --timeout=$t 2> "$WORK/wait.err"; then
    fail "wait --timeout=$t accepted"
  fi
  assert_contains "$(cat "$WORK/wait.err")" "--timeout=$t" "wait --timeout=$t refused by the flag"
done
"$CTL" delete trainjob twelve >/dev/null
log "wait timeout ok"

# 6. apply --wait: one command submits and blocks until the job ends, as sbatch --wait.
job=$(write_job quick 2 2 'echo "rank $TRAINLET_RANK"')
out=$("$CTL" apply -f "$job" --wait --timeout 60s) || fail "apply --wait of a completing job: $out"
[ "$out" = "$(printf 'trainjob/quick created\ntrainjob/quick complete')" ] || fail "apply --wait printed: $out"
"$CTL" get trainjobs quick | grep -q Succeeded || fail "quick not Succeeded after apply --wait"
job=$(write_job doomed 1 2 'if [ "$TRAINLET_RANK" = 1 ]; then exit 3; fi')
if "$CTL" apply -f "$job" --wait 2> "$WORK/apply.err" > "$WORK/apply.out"; then
  fail "apply --wait of a failing job must exit non-zero"
fi
assert_contains "$(cat "$WORK/apply.out")" "trainjob/doomed created" "apply --wait output"
assert_contains "$(cat "$WORK/apply.err")" "ended Failed" "apply --wait's reason"
assert_contains "$(cat "$WORK/apply.err")" "exited with code 3" "apply --wait's reason"
job=$(write_job slow2 1 1 'sleep 30')
if "$CTL" apply -f "$job" --wait --timeout 1s 2> "$WORK/apply.err" >/dev/null; then
  fail "apply --wait --timeout must time out"
fi
assert_contains "$(cat "$WORK/apply.err")" "timed out waiting for trainjob/slow2" "apply --wait timeout"
# The same file again (a retried CI step): unchanged, and still waited for while it runs.
if "$CTL" apply -f "$job" --wait --timeout 1s 2> "$WORK/apply.err" > "$WORK/apply.out"; then
  fail "apply --wait of an unchanged running job returned at once: $(cat "$WORK/apply.out")"
fi
assert_contains "$(cat "$WORK/apply.out")" "trainjob/slow2 unchanged" "apply --wait of an unchanged job"
assert_contains "$(cat "$WORK/apply.err")" "timed out waiting for trainjob/slow2" "apply --wait of an unchanged job"
"$CTL" delete trainjob slow2 >/dev/null
# An unchanged job that already ended: Failed exits 1 with its reason, Succeeded exits 0.
job=$(write_job doomed 1 2 'if [ "$TRAINLET_RANK" = 1 ]; then exit 3; fi')
if "$CTL" apply -f "$job" --wait 2> "$WORK/apply.err" >/dev/null; then
  fail "apply --wait of an unchanged Failed job exited 0"
fi
assert_contains "$(cat "$WORK/apply.err")" "ended Failed" "apply --wait of an unchanged Failed job"
job=$(write_job quick 2 2 'echo "rank $TRAINLET_RANK"')
out=$("$CTL" apply -f "$job" --wait --timeout 60s) || fail "apply --wait of an unchanged Succeeded job: $out"
[ "$out" = "$(printf 'trainjob/quick unchanged\ntrainjob/quick complete')" ] || fail "apply --wait printed: $out"
if "$CTL" apply -f "$job" --wait --timeout forever 2> "$WORK/apply.err"; then fail "bad --timeout accepted"; fi
assert_contains "$(cat "$WORK/apply.err")" "--timeout=forever" "apply --timeout error names the flag"
log "apply --wait ok"

# 7. local up's export line is one shell word: a --dir with a space and a $(...) in it comes back
# whole through eval, and nothing in it runs.
odd="$WORK/odd dir \$(touch pwned)"
out=$("$CTL" local up --agents 1 --dir "$odd" 2>/dev/null) || fail "local up in a dir with a space"
for f in "$odd"/pids/*.pid; do EXTRA_PIDS+=("$(awk '{print $1}' "$f")"); done
(cd "$WORK" && eval "$out" && [ "$TRAINLET_HOME" = "$odd" ] && "$CTL" get nodes >/dev/null) ||
  fail "eval of local up's output: $out"
[ ! -e "$WORK/pwned" ] || fail "eval ran a command from the dir's name: $out"
"$CTL" local down --dir "$odd" >/dev/null || fail "local down of the odd dir"
log "local up's export line survives eval"
echo "PASS local_cluster_test"
