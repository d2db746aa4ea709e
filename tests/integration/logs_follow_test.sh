#!/usr/bin/env bash
# `trainletctl logs -f` waits for what is not there yet, as `kubectl logs -f` does: started right
# after an apply, on a job still queued behind another, it says on stderr what the job waits for,
# then, once the other is deleted, prints every rank's lines and exits 0 when they have exited. A rank the job
# does not have is refused at once; a job deleted while it waits ends it with an error. A job that
# restarts is followed into its next attempt, to its end (before, -f ended with the first attempt,
# exit 0, while the job restarted).
source "$(dirname "$0")/lib.sh"

start_cluster 1 --slots 2
"$CTL" apply -f "$(write_job blocker 1 2 'sleep 300')" >/dev/null  # deleted below
wait_for 30 sh -c "'$CTL' get trainjobs blocker | grep -q Running" || fail "blocker never ran"
"$CTL" apply -f "$(write_job later 1 2 'echo "later says hi from $TRAINLET_RANK"; sleep 0.5; echo "and bye from $TRAINLET_RANK"')" >/dev/null
"$CTL" get trainjobs later | grep -q Pending || fail "later should wait for blocker's slots: $("$CTL" get trainjobs later)"

"$CTL" logs later -f > "$WORK/follow.out" 2> "$WORK/follow.err" &
follower=$!
EXTRA_PIDS+=("$follower")
wait_for 10 grep -q "waiting for trainjob/later to start (Pending" "$WORK/follow.err" ||
  fail "logs -f did not say what it waits for: $(cat "$WORK/follow.err")"
kill -0 "$follower" 2>/dev/null || fail "logs -f ended before later started: $(cat "$WORK/follow.err")"

# A rank the running job does not have: refused at once, not waited for.
if out=$(timeout 10 "$CTL" logs blocker --rank 9 -f 2>&1); then fail "--rank 9 was accepted: $out"; fi
assert_contains "$out" "--rank 9" "logs --rank 9 -f"
"$CTL" delete trainjob blocker >/dev/null  # its slots go to later

wait_for 60 sh -c "! kill -0 $follower 2>/dev/null" || fail "logs -f did not end with later's ranks"
rc=0; wait "$follower" || rc=$?
[ "$rc" -eq 0 ] || fail "logs -f exited $rc: $(cat "$WORK/follow.err")"
out=$(cat "$WORK/follow.out")
for r in 0 1; do
  assert_contains "$out" "[rank $r] later says hi from $r" "logs -f"
  assert_contains "$out" "[rank $r] and bye from $r" "logs -f"
done
"$CTL" get trainjobs later | grep -q Succeeded || fail "later: $("$CTL" get trainjobs later)"
log "logs -f waited for later to start and followed both ranks to their end"

# Deleted while waiting to start: an error, not a wait forever.
"$CTL" apply -f "$(write_job holder 1 2 'sleep 300')" >/dev/null
wait_for 30 sh -c "'$CTL' get trainjobs holder | grep -q Running" || fail "holder never ran"
"$CTL" apply -f "$(write_job gone 1 2 'echo never')" >/dev/null
"$CTL" logs gone -f > "$WORK/gone.out" 2> "$WORK/gone.err" &
follower=$!
EXTRA_PIDS+=("$follower")
wait_for 10 grep -q "waiting for trainjob/gone to start" "$WORK/gone.err" || fail "logs -f gone: $(cat "$WORK/gone.err")"
"$CTL" delete trainjob gone >/dev/null
wait_for 20 sh -c "! kill -0 $follower 2>/dev/null" || fail "logs -f kept waiting for a deleted job"
rc=0; wait "$follower" || rc=$?
[ "$rc" -ne 0 ] || fail "logs -f of a deleted job exited 0"
assert_contains "$(cat "$WORK/gone.err")" "trainjob/gone not found" "logs -f of a deleted job"

# Restarts: attempt 1 fails, attempt 2 succeeds; one -f prints both, says so on stderr, exits 0.
"$CTL" delete trainjob holder >/dev/null
retry_runtime_yaml retry 2 > "$WORK/retry.yaml"
"$CTL" apply -f "$WORK/retry.yaml" >/dev/null
write_job twice 1 2 'echo "attempt $TRAINLET_ATTEMPT of $TRAINLET_RANK"; sleep 0.3; [ "$TRAINLET_ATTEMPT" = 2 ]' >/dev/null
sed -i 's/name: plain$/name: retry/' "$WORK/twice.yaml"
"$CTL" apply -f "$WORK/twice.yaml" >/dev/null
rc=0; timeout 60 "$CTL" logs twice -f > "$WORK/twice.out" 2> "$WORK/twice.err" || rc=$?
[ "$rc" -eq 0 ] || fail "logs -f of a restarting job exited $rc: $(cat "$WORK/twice.err")"
for a in 1 2; do
  for r in 0 1; do
    assert_contains "$(cat "$WORK/twice.out")" "[rank $r] attempt $a of $r" "logs -f across a restart"
  done
done
assert_contains "$(cat "$WORK/twice.err")" "trainjob/twice: following attempt 2" "logs -f's note"
"$CTL" get trainjobs twice | grep -q Succeeded || fail "twice: $("$CTL" describe trainjob twice)"
log "logs -f followed a restarting job through both attempts to its end"
echo "PASS logs_follow_test"
