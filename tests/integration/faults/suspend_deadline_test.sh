#!/usr/bin/env bash
# Suspend and resume, through `trainletctl suspend|resume` and through `apply` of the same
# TrainJob with only spec.suspend changed; and spec.activeDeadlineSeconds. Checked from trainletctl
# and from the process table (the ranks of a suspended or failed job are gone).
source "$(dirname "$0")/../lib.sh"

# job_field NAME FIELD: a top-level field of the job's status, as `get -o json` prints it.
job_field() {
  "$CTL" get trainjob "$1" -o json | python3 -c '
import json, sys
doc = json.load(sys.stdin)
job = doc["jobs"][0] if "jobs" in doc else doc
print(job.get(sys.argv[1], ""))' "$2"
}
pid_count() { job_pids "$1" | wc -l; }
phase_is() { [ "$(job_field "$1" phase)" = "$2" ]; }
running_attempt() { phase_is "$1" Running && [ "$(job_field "$1" attempt)" = "$2" ]; }
# The attempt the live ranks of job $1 were started for (their TRAINLET_ATTEMPT), one per line.
rank_attempts() {
  local p
  for p in $(job_pids "$1"); do
    tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | sed -n 's/^TRAINLET_ATTEMPT=//p'
  done | sort -u
}
# wait_for takes a command: these re-count on every try (a "$(pid_count x)" argument would not).
pids_at_least() { [ "$(pid_count "$1")" -ge "$2" ]; }
pids_none() { [ "$(pid_count "$1")" -eq 0 ]; }

start_cluster 2 --slots 2
log "cluster up"

# A 2-node job that runs until stopped.
job=$(write_job sj 2 1 'echo "attempt $TRAINLET_ATTEMPT rank $TRAINLET_RANK"; exec sleep 300')
"$CTL" apply -f "$job" >/dev/null
wait_for 30 running_attempt sj 1 || fail "sj attempt 1 not Running: $("$CTL" describe trainjob sj)"
wait_for 10 pids_at_least sj 2 || fail "sj ranks not in the process table"

# 1. trainletctl suspend: every rank stops, the job stays, Suspended.
out=$("$CTL" suspend trainjob sj)
[ "$out" = "trainjob/sj suspended" ] || fail "suspend printed: $out"
"$CTL" wait trainjob/sj --for=condition=Suspended --timeout=10s >/dev/null || fail "no Suspended condition"
wait_for 20 pids_none sj || fail "ranks of a suspended job still run: $(job_pids sj)"
phase_is sj Suspended || fail "phase $(job_field sj phase), not Suspended"
d=$("$CTL" describe trainjob sj)
assert_contains "$d" "Suspended" "describe of a suspended job"
out=$("$CTL" suspend trainjob/sj)
assert_contains "$out" "already suspended" "a second suspend"
sleep 1
[ "$(pid_count sj)" -eq 0 ] || fail "a suspended job was started again"
log "suspend: ranks stopped, job kept"

# 2. trainletctl resume: a new attempt.
out=$("$CTL" resume trainjob sj)
[ "$out" = "trainjob/sj resumed" ] || fail "resume printed: $out"
wait_for 30 running_attempt sj 2 || fail "sj attempt 2 not Running: $("$CTL" describe trainjob sj)"
wait_for 10 pids_at_least sj 2 || fail "attempt 2's ranks not running"
[ "$(rank_attempts sj)" = 2 ] || fail "live ranks of attempts: $(rank_attempts sj)"
log "resume: attempt 2 runs"

# 3. The same through apply: only spec.suspend changed.
suspended_file="$WORK/sj-suspended.yaml"
sed 's/^spec:$/spec:\n  suspend: true/' "$job" > "$suspended_file"
grep -q "^  suspend: true" "$suspended_file" || fail "could not write the suspended spec"
out=$("$CTL" apply -f "$suspended_file")
[ "$out" = "trainjob/sj configured" ] || fail "apply with suspend: true printed: $out"
wait_for 20 pids_none sj || fail "apply suspend: ranks still run"
phase_is sj Suspended || fail "apply suspend: phase $(job_field sj phase)"
out=$("$CTL" apply -f "$suspended_file")
[ "$out" = "trainjob/sj unchanged" ] || fail "re-apply printed: $out"
out=$("$CTL" apply -f "$job")
[ "$out" = "trainjob/sj configured" ] || fail "apply without suspend printed: $out"
wait_for 30 running_attempt sj 3 || fail "sj attempt 3 not Running: $("$CTL" describe trainjob sj)"
wait_for 10 pids_at_least sj 2 || fail "attempt 3's ranks not running"
[ "$(rank_attempts sj)" = 3 ] || fail "live ranks of attempts: $(rank_attempts sj)"
# Suspends are not failures: no restart was used up.
d=$("$CTL" describe trainjob sj)
[ "$(grep -c "Stopped" <<<"$d")" -ge 2 ] || fail "attempts 1 and 2 should read Stopped: $d"
log "apply flips suspend both ways; attempt 3 runs"

# 4. Any other change is still refused.
changed=$(write_job sj 2 1 'echo changed; exec sleep 300')
if "$CTL" apply -f "$changed" 2> "$WORK/changed.err"; then fail "a changed command was accepted"; fi
assert_contains "$(cat "$WORK/changed.err")" "already exists" "apply of a changed spec"
assert_contains "$(cat "$WORK/changed.err")" "only spec.suspend may change" "apply of a changed spec"
"$CTL" delete trainjob sj --timeout 30s >/dev/null || fail "delete sj"
wait_for 10 pids_none sj || fail "sj's ranks outlived its delete"

# 5. Resume of an unknown job fails clearly.
if "$CTL" resume trainjob nosuch 2> "$WORK/nosuch.err"; then fail "resume of an unknown job"; fi
assert_contains "$(cat "$WORK/nosuch.err")" "trainjob/nosuch not found" "resume of an unknown job"

# 6. activeDeadlineSeconds: the job fails with DeadlineExceeded, its ranks are stopped, and it
# stays Failed. Its warning is off here, so the deadline alone ends it (section 7 has the warning).
dl=$(write_job dl 2 1 'exec sleep 300')
sed -i 's/^spec:$/spec:\n  activeDeadlineSeconds: 3/' "$dl"
sed -i 's/^metadata:$/metadata:\n  annotations:\n    trainlet.io\/deadline-warning: "false"/' "$dl"
start=$(date +%s)
"$CTL" apply -f "$dl" >/dev/null
wait_for 10 pids_at_least dl 2 || fail "dl ranks not running"
"$CTL" wait trainjob/dl --for=condition=Failed --timeout=20s >/dev/null || fail "dl did not fail"
elapsed=$(( $(date +%s) - start ))
[ "$elapsed" -ge 2 ] || fail "dl failed after ${elapsed}s, before its 3 s deadline"
[ "$(job_field dl reason)" = DeadlineExceeded ] || fail "reason $(job_field dl reason)"
wait_for 20 pids_none dl || fail "ranks outlived the deadline: $(job_pids dl)"
d=$("$CTL" describe trainjob dl)
assert_contains "$d" "activeDeadlineSeconds" "describe names the deadline as the cause"
sleep 2
phase_is dl Failed || fail "dl left Failed: $(job_field dl phase)"
[ "$(job_field dl attempt)" = 1 ] || fail "dl was restarted: attempt $(job_field dl attempt)"
[ "$(pid_count dl)" -eq 0 ] || fail "dl's ranks came back"
# A finished job is neither suspended nor restarted by asking.
out=$("$CTL" resume trainjob dl)
assert_contains "$out" "is not suspended (Failed)" "resume of a Failed job"
if "$CTL" suspend trainjob dl 2> "$WORK/dl.err"; then fail "a Failed job was suspended"; fi
assert_contains "$(cat "$WORK/dl.err")" "finished" "suspend of a Failed job"
phase_is dl Failed || fail "dl left Failed after resume/suspend: $(job_field dl phase)"
log "deadline: Failed with DeadlineExceeded, ranks gone, stays Failed"

# 7. The warning before the deadline is on by default: 30 s of grace, at most half of a 6 s
# deadline, so SIGUSR1 comes at 3 s. `sleep` does not catch it and dies: the job fails then with
# DeadlineExceeded, not as a rank failure, and is not restarted.
dw=$(write_job dw 1 1 'exec sleep 300')
sed -i 's/^spec:$/spec:\n  activeDeadlineSeconds: 6/' "$dw"
start=$(date +%s%3N)
"$CTL" apply -f "$dw" >/dev/null
"$CTL" wait trainjob/dw --for=condition=Failed --timeout=20s >/dev/null || fail "dw did not fail"
elapsed=$(( $(date +%s%3N) - start ))
[ "$elapsed" -ge 2500 ] && [ "$elapsed" -lt 5900 ] ||
  fail "dw failed ${elapsed} ms after apply; its warning is due at 3 s, its deadline at 6 s"
[ "$(job_field dw reason)" = DeadlineExceeded ] || fail "dw reason $(job_field dw reason)"
[ "$(job_field dw attempt)" = 1 ] || fail "dw was restarted: attempt $(job_field dw attempt)"
d=$("$CTL" describe trainjob dw)
assert_contains "$d" "DeadlineWarning" "describe shows the warning"
assert_contains "$d" "ended after its warning before activeDeadlineSeconds" "describe says why"
wait_for 20 pids_none dw || fail "dw's ranks outlived it: $(job_pids dw)"
log "deadline warning by default: an uncaught SIGUSR1 after ${elapsed} ms, DeadlineExceeded"

echo "PASS suspend_deadline_test"
