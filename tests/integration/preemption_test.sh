#!/usr/bin/env bash
# The warning before a stop the job did not ask for (issue 14), end to end with real daemons: a
# rank that checkpoints on SIGUSR1 and resumes from its checkpoint in the next attempt.
#  1. drain --force: SIGUSR1 first; the rank checkpoints and exits within the grace (no SIGTERM);
#     the job restarts on the other node and continues from the checkpoint.
#  2. A rank that keeps running after the warning gets SIGTERM the grace later, also when the
#     node's agent is killed during the grace (the step runs the sequence).
#  3. activeDeadlineSeconds with a grace annotation: SIGUSR1 the grace before the deadline, and
#     the job still fails with DeadlineExceeded at the deadline.
# The path a preemption by a higher-priority job takes (JobController::Preempt) sends the same
# StopWorkers; preemption_lib.sh is for that test too.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/preemption_lib.sh"

field() { "$CTL" get trainjob "$1" -o json | python3 -c \
  'import json,sys; j=json.load(sys.stdin)["jobs"][0]; v=j.get(sys.argv[1], ""); print(",".join(v) if isinstance(v, list) else v)' "$2"; }
running_attempt() { [ "$(field "$1" phase)" = Running ] && [ "$(field "$1" attempt)" = "$2" ]; }
gone() { ! "$CTL" get trainjob "$1" >/dev/null 2>&1; }
remove() { "$CTL" delete trainjob "$1" --timeout 30s >/dev/null; wait_for 30 gone "$1"; }
other_node() { if [ "$1" = node-1 ]; then echo node-2; else echo node-1; fi; }

start_cluster 2 --slots 1
log "cluster up"

log "1. drain --force: the warning, a checkpoint, and a restart that continues from it"
"$CTL" apply -f "$(checkpoint_job ck "" '    trainlet.io/preemption-grace-seconds: "20"')" >/dev/null
wait_for 30 running_attempt ck 1 || fail "ck not Running: $("$CTL" describe trainjob ck)"
wait_for 20 ckpt_progress_at_least ck 20 || fail "ck's rank does not count: $(ckpt_events ck)"
from=$(field ck placement)
t0=$(now_ms)
"$CTL" drain "$from" --force --timeout 30s > "$WORK/drain.out" 2>&1 ||
  fail "drain --force: $(cat "$WORK/drain.out")"
t1=$(now_ms)
ckpt_has ck usr1 || fail "the rank got no SIGUSR1: $(ckpt_events ck)"
if ckpt_has ck term; then fail "the rank exited at the warning, yet got SIGTERM: $(ckpt_events ck)"; fi
[ $((t1 - t0)) -lt 15000 ] || fail "drain took $((t1 - t0)) ms: the rank that exited was not done"
saved=$(ckpt_step ck)
[ -n "$saved" ] && [ "$saved" -ge 20 ] || fail "checkpoint at step '$saved'"
wait_for 30 running_attempt ck 2 || fail "ck attempt 2 not Running: $("$CTL" describe trainjob ck)"
[ "$(field ck placement)" = "$(other_node "$from")" ] || fail "ck restarted on $(field ck placement)"
restart_line() { ckpt_events ck start | grep "attempt=2 "; }
wait_for 10 restart_line || fail "attempt 2's rank did not start: $(ckpt_events ck)"
assert_contains "$(restart_line)" "attempt=2 from=$saved " "attempt 2 continues from the checkpoint"
assert_contains "$(restart_line)" "reason=failed" "TRAINLET_RESTART_REASON of a drained job"
d=$("$CTL" describe trainjob ck)
assert_contains "$d" "DrainWarning" "describe shows the warning"
assert_contains "$d" "SIGUSR1 sent to every rank; SIGTERM in 20 s" "the warning's event"
"$CTL" uncordon "$from" >/dev/null
remove ck
log "drain --force: SIGUSR1, checkpoint at step $saved, attempt 2 resumed from it"

log "2. a rank that stays after the warning gets SIGTERM the grace later"
"$CTL" apply -f "$(checkpoint_job stay "" '    trainlet.io/preemption-grace-seconds: "2"' \
  '      - name: CKPT_STAY\n        value: "1"')" >/dev/null
wait_for 30 running_attempt stay 1 || fail "stay not Running: $("$CTL" describe trainjob stay)"
wait_for 20 ckpt_progress_at_least stay 5 || fail "stay's rank does not count"
from=$(field stay placement)
"$CTL" drain "$from" --force --timeout 30s > "$WORK/drain.out" 2>&1 ||
  fail "drain --force: $(cat "$WORK/drain.out")"
wait_for 10 ckpt_has stay term || fail "no SIGTERM after the grace: $(ckpt_events stay)"
usr1=$(ckpt_time stay usr1) term=$(ckpt_time stay term)
[ $((term - usr1)) -ge 1700 ] || fail "SIGTERM $((term - usr1)) ms after SIGUSR1, grace is 2 s"
[ $((term - usr1)) -lt 6000 ] || fail "SIGTERM $((term - usr1)) ms after SIGUSR1, grace is 2 s"
"$CTL" uncordon "$from" >/dev/null
remove stay
log "warning grace: SIGTERM $((term - usr1)) ms after SIGUSR1"

log "2b. the agent is killed during the grace: the step still sends SIGTERM when it runs out"
"$CTL" apply -f "$(checkpoint_job orphan "" '    trainlet.io/preemption-grace-seconds: "3"' \
  '      - name: CKPT_STAY\n        value: "1"')" >/dev/null
wait_for 30 running_attempt orphan 1 || fail "orphan not Running: $("$CTL" describe trainjob orphan)"
wait_for 20 ckpt_progress_at_least orphan 5 || fail "orphan's rank does not count"
from=$(field orphan placement)
agent_pid=$(awk '{print $1}' "$TRAINLET_HOME/pids/$from.pid")
"$CTL" drain "$from" --force --timeout 60s > "$WORK/drain-orphan.out" 2>&1 &
drain_pid=$!
wait_for 10 ckpt_has orphan usr1 || fail "orphan got no SIGUSR1: $(ckpt_events orphan)"
kill -9 "$agent_pid"
wait_for 10 ckpt_has orphan term || fail "no SIGTERM once the agent died: $(ckpt_events orphan)"
usr1=$(ckpt_time orphan usr1) term=$(ckpt_time orphan term)
[ $((term - usr1)) -ge 2700 ] || fail "SIGTERM $((term - usr1)) ms after SIGUSR1, grace is 3 s"
[ $((term - usr1)) -lt 8000 ] || fail "SIGTERM $((term - usr1)) ms after SIGUSR1, grace is 3 s"
wait "$drain_pid" || true  # done once the node is Lost and its ranks given up
# The delete cannot finish: its Lost rank's node never comes back to confirm (delete_gate.h), so
# waiting for it only ran out a timeout. Its ranks on the live node are what section 3 needs gone.
"$CTL" delete trainjob orphan --wait=false >/dev/null
no_orphan_ranks() { [ -z "$(job_pids orphan)" ]; }
wait_for 30 no_orphan_ranks || fail "ranks of the deleted orphan remain: $(job_pids orphan)"
log "agent killed in the grace: SIGTERM still came $((term - usr1)) ms after SIGUSR1"

log "3. activeDeadlineSeconds: the warning comes the grace before the deadline"
applied=$(now_ms)
"$CTL" apply -f "$(checkpoint_job dl '  activeDeadlineSeconds: 8' \
  '    trainlet.io/preemption-grace-seconds: "4"' \
  '      - name: CKPT_STAY\n        value: "1"')" >/dev/null
wait_for 30 running_attempt dl 1 || fail "dl not Running: $("$CTL" describe trainjob dl)"
"$CTL" wait trainjob/dl --for=condition=Failed --timeout=30s >/dev/null || fail "dl did not fail"
[ "$(field dl reason)" = DeadlineExceeded ] || fail "dl failed with $(field dl reason)"
ckpt_has dl usr1 || fail "no warning before the deadline: $(ckpt_events dl)"
usr1=$(( $(ckpt_time dl usr1) - applied ))
[ "$usr1" -ge 3000 ] && [ "$usr1" -lt 7500 ] || fail "the warning came $usr1 ms after apply (deadline 8 s, grace 4 s)"
wait_for 10 ckpt_has dl term || fail "no SIGTERM at the deadline: $(ckpt_events dl)"
term=$(( $(ckpt_time dl term) - applied ))
[ "$term" -ge 7000 ] || fail "SIGTERM $term ms after apply, before the 8 s deadline"
[ "$(ckpt_step dl)" != "" ] || fail "no checkpoint at the warning"
assert_contains "$("$CTL" describe trainjob dl)" "DeadlineWarning" "describe shows the deadline warning"
log "deadline: SIGUSR1 at $usr1 ms, SIGTERM at $term ms, DeadlineExceeded"

echo "PASS preemption_test"
