#!/usr/bin/env bash
# Stall detection (issue 15): ranks that run but never report progress. With
# trainlet.io/progress-timeout: 2s a Running job gets condition Stalled=True and a Warning event;
# with trainlet.io/on-stall: restart the attempt fails with cause Stalled and a new attempt starts,
# until the restart limit fails the job. Without on-stall the job keeps running. A bad timeout is
# refused at apply, naming the annotation.
source "$(dirname "$0")/../lib.sh"

start_cluster 2 --slots 2

# stall_job NAME ANNOTATION-LINES...: a 2-node plain job of `sleep 300` that never reports.
stall_job() {
  local name=$1 file="$WORK/$1.yaml"; shift
  {
    printf 'apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata:\n  name: %s\n' "$name"
    printf '  annotations:\n'
    for a in "$@"; do printf '    %s\n' "$a"; done
    printf 'spec:\n  runtimeRef:\n    name: plain\n  trainer:\n    numNodes: 2\n'
    printf '    command: ["/bin/sleep", "300"]\n'
  } > "$file"
  echo "$file"
}

# 1. A bad timeout is refused, naming the annotation; nothing is stored.
if out=$("$CTL" apply -f "$(stall_job bad 'trainlet.io/progress-timeout: "10"')" 2>&1); then
  fail "a progress-timeout of 10 (no unit) was accepted: $out"
fi
assert_contains "$out" "metadata.annotations[trainlet.io/progress-timeout]" "the refusal"
if "$CTL" get trainjob bad >/dev/null 2>&1; then fail "the refused job exists"; fi

# 2. on-stall: restart. Stalled after 2 s, then attempt 2; it stalls too and, with one restart
# allowed, the job fails.
"$CTL" apply -f "$(stall_job stuck 'trainlet.io/progress-timeout: 2s' \
  'trainlet.io/on-stall: restart' 'trainlet.io/max-restarts: "1"')" >/dev/null
wait_for 20 sh -c "'$CTL' get trainjobs stuck | grep -qE 'Running +2 +2 +1 +- +- '" \
  || fail "stuck never Running: $("$CTL" get trainjobs stuck)"
t0=$(date +%s%N)
wait_for 20 sh -c "'$CTL' get trainjobs stuck | grep -qE 'Running +2 +2 +2 '" \
  || fail "no attempt 2 after the stall: $("$CTL" describe trainjob stuck)"
took_ms=$(( ($(date +%s%N) - t0) / 1000000 ))
log "stuck: attempt 2 running $took_ms ms after attempt 1 was"
[ "$took_ms" -ge 1500 ] || fail "restarted after $took_ms ms, before the 2 s timeout"
d=$("$CTL" describe trainjob stuck)
assert_contains "$d" "Stalled: attempt 1 has run for " "attempt 1 cause"
assert_contains "$d" "Warning   Stalled" "the Stalled event"
"$CTL" wait trainjob/stuck --for=condition=Failed --timeout=30s >/dev/null \
  || fail "stuck not Failed after its second stall: $("$CTL" describe trainjob stuck)"
d=$("$CTL" describe trainjob stuck)
assert_contains "$d" "BackoffLimitExceeded" "the final reason"
stalled=$("$CTL" get trainjob stuck -o json | python3 -c '
import json, sys
job = json.load(sys.stdin)["jobs"][0]
print(" ".join(c["status"] + ":" + c["reason"] for c in job["conditions"] if c["type"] == "Stalled"))')
[ "$stalled" = "True:ProgressTimeout" ] || fail "Stalled condition of stuck: '$stalled'"
no_stuck() { [ -z "$(job_pids stuck)" ]; }
wait_for 20 no_stuck || fail "ranks of stuck still run: $(job_pids stuck)"
log "on-stall restart: Stalled, attempt 2, then Failed after the restart limit"

# 3. No on-stall: the condition only; the job keeps running its first attempt.
"$CTL" apply -f "$(stall_job quiet 'trainlet.io/progress-timeout: 2s')" >/dev/null
"$CTL" wait trainjob/quiet --for=condition=Stalled --timeout=30s >/dev/null \
  || fail "quiet never Stalled: $("$CTL" describe trainjob quiet)"
sleep 1
"$CTL" get trainjobs quiet | grep -qE 'Running +2 +2 +1 ' \
  || fail "quiet should still run attempt 1: $("$CTL" get trainjobs quiet)"
"$CTL" delete trainjob quiet >/dev/null
log "stall without on-stall: condition only"
